import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import test from 'ava';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';

// Nothing a run makes outlives it: the scratch folders of the servers an episode, a spare or a
// worker thread started are gone when the command ends, by its end or by Ctrl-C (worker threads are
// terminated by their pool, so the main thread removes what they made). Each run gets a TMPDIR of
// its own, so that what is left there is the run's.

const leftovers = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('agent-r1-mcp-'));

test.serial('a files rollout on 2 worker threads leaves no scratch folder', (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-leaks-'));
  try {
    const out = join(tmp, 'run');
    const r = cli(
      ['rollout', '--scenario', 'files', '--policy', 'expert', '--episodes', '20', '--workers', '2', '--out', out],
      {
        env: { TMPDIR: tmp },
      },
    );
    t.is(r.code, 0, r.stderr);
    t.deepEqual(leftovers(tmp), []);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test('a files rollout stopped by Ctrl-C leaves no scratch folder', async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-leaks-'));
  try {
    const args = ['rollout', '--scenario', 'files', '--policy', 'expert', '--episodes', '400', '--workers', '2'];
    const child = spawn(process.execPath, cliArgs([...args, '--out', join(tmp, 'run')]), {
      cwd: repoRoot,
      env: { ...process.env, TMPDIR: tmp },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    // Interrupted mid-run: once episodes are being played (folders exist).
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (leftovers(tmp).length > 0) {
          clearInterval(poll);
          resolve();
        }
      }, 50);
    });
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    t.is(code, 130, stderr);
    t.deepEqual(leftovers(tmp), []);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
