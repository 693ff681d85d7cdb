import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { filesScenario } from '../../scenarios/files/index.ts';
import { expert } from '../../scenarios/files/policies.ts';
import { checkScenarioDir } from '../../src/app/check-scenario.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';

// The files scenario's slower checks (npm run test:slow): every isolation mode, Ctrl-C on the CLI,
// scenario check of the scenario and of the mcp template, replay --live-tools and its drift report.

const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-files-slow-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

/** The processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(pid);
      } catch {
        return false;
      }
    })
    .map(Number);
}

const alive = (pid: number) =>
  existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');

test('isolation modes give the same records: a server per episode, spare ones, warm ones moved by roots', async (t) => {
  t.timeout(5 * 60_000);
  const bytes = new Set<string>();
  for (const isolation of ['episode', 'spare', 'roots'] as const) {
    const { scenario, server } = await filesScenario(isolation, { maxServers: 2, spares: 1 });
    const { records } = await rollout({ scenario, policy: expert, split: 'dev', episodes: 4, seed: 1 });
    bytes.add(JSON.stringify(records));
    t.true(
      records.every((r) => r.outcome.success),
      isolation,
    );
    await server.close();
    t.is(server.openConnections, 0, `${isolation}: every server ended`);
  }
  t.is(bytes.size, 1);
});

test.serial('Ctrl-C during a files rollout on 2 workers: exit 130, records kept, no server left running', async (t) => {
  t.timeout(5 * 60_000);
  const out = join(scratch, 'sigint');
  const file = join(out, 'episodes.jsonl');
  const child = spawn(
    process.execPath,
    cliArgs([
      'rollout',
      '--scenario',
      'files',
      '--policy',
      'expert',
      '--episodes',
      '5000',
      '--workers',
      '2',
      '--out',
      out,
    ]),
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0);
  const deadline = Date.now() + 90_000;
  while (lines() < 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const servers = childrenOf(child.pid!);
  t.true(servers.length > 0, 'server processes were running');
  child.kill('SIGINT');
  t.is(await exited, 130, stderr);
  t.regex(stderr, /interrupted: \d+ finished episodes written/);
  t.deepEqual(servers.filter(alive), [], 'every server process ended with the CLI');
});

test('scenario check is green for files and for the mcp template: episodes repeat, here and in a worker, and replay', async (t) => {
  t.timeout(5 * 60_000);
  for (const dir of ['scenarios/files', 'scenarios/templates/mcp']) {
    const { problems, warnings, checked } = await checkScenarioDir(dir);
    t.deepEqual(problems, [], dir);
    t.deepEqual(warnings, [], dir);
    t.true(
      checked.some((c) =>
        /policies\.expert: (\d+) episodes played here and in a fresh worker thread: identical bytes; replayed \(recorded tool results, live tools\): verified; success \1\/\1/.test(
          c,
        ),
      ),
      `${dir}: ${checked.join('\n')}`,
    );
  }
});

test.serial('CLI: replay --live-tools re-runs the calls and reports drift at the first call that differs', (t) => {
  const source = join(scratch, 'source');
  const out = join(scratch, 'drift');
  const fixture = new URL('../fixtures/mcp/drift', import.meta.url).pathname;
  rmSync(source, { recursive: true, force: true });
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'notes.txt'), 'buy milk\n');
  const run = cli([
    'rollout',
    '--scenario',
    fixture,
    '--option',
    `source=${source}`,
    '--policy',
    'reader',
    '--episodes',
    '2',
    '--out',
    out,
  ]);
  t.is(run.code, 0, run.stderr);
  const file = join(out, 'episodes.jsonl');
  // The fixture is a folder of its own: replay runs its code because it is named here.
  const same = cli(['replay', file, '--scenario', fixture, '--live-tools', '--json']);
  t.like(same.lastJson(), { episodes: 2, verified: 2 }, same.stderr);
  writeFileSync(join(source, 'notes.txt'), 'buy eggs\n');
  const drift = cli(['replay', file, '--scenario', fixture, '--live-tools', '--quiet']);
  t.is(drift.code, 1);
  t.regex(
    drift.stdout,
    /DIVERGED read-0#0 at turn 1, call 2 \(read_text_file\), field results\n\s+expected: .*buy milk.*\n\s+actual: .*buy eggs/,
  );
  const recorded = cli(['replay', file, '--scenario', fixture, '--json']);
  t.like(recorded.lastJson(), { episodes: 2, verified: 2 }, 'the recorded results still verify');
});

test.serial('CLI: rollout of 20, replay with no server verifies all 20; --workers 2 gives the same bytes', (t) => {
  const runs = ['0', '2'].map((workers) => {
    const out = join(scratch, `w${workers}`);
    const r = cli([
      'rollout',
      '--scenario',
      'files',
      '--policy',
      'expert',
      '--episodes',
      '20',
      '--workers',
      workers,
      '--out',
      out,
    ]);
    t.is(r.code, 0, r.stderr);
    return readFileSync(join(out, 'episodes.jsonl'), 'utf8');
  });
  t.is(runs[0], runs[1]);
  const replay = cli(['replay', join(scratch, 'w2', 'episodes.jsonl'), '--json']);
  t.is(replay.code, 0, replay.stderr);
  t.like(replay.lastJson(), { episodes: 20, verified: 20, diverged: 0, corrupt: 0 });
});
