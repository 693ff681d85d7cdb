import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { parseRecordLine } from '../../src/record/record.ts';
import { cliArgs, repoRoot } from '../helpers/cli.ts';

const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0);

for (const workers of ['0', '2']) {
  test(`SIGINT stops a rollout cleanly (${workers} workers): every finished record written, the file valid JSONL`, async (t) => {
    const out = join(mkdtempSync(join(tmpdir(), 'agent-r1-sigint-')), 'run');
    const file = join(out, 'episodes.jsonl');
    const child = spawn(
      process.execPath,
      cliArgs([
        'rollout',
        '--scenario',
        'calculator',
        '--policy',
        'random',
        '--episodes',
        '50000',
        '--workers',
        workers,
        '--out',
        out,
      ]),
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const deadline = Date.now() + 60_000;
    while (lines(file) < 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const before = lines(file);
    t.true(before >= 20, 'the run wrote records before the interrupt');
    child.kill('SIGINT');
    const code = await exited;
    t.is(code, 130, stderr);
    t.regex(stderr, /interrupted: \d+ finished episodes written/);
    const text = readFileSync(file, 'utf8');
    t.true(text.endsWith('\n'));
    const records = text
      .split('\n')
      .filter(Boolean)
      .map((line, i) => parseRecordLine(line, i + 1));
    t.true(records.length >= before);
    t.true(records.length < 50000);
    const written = Number(/interrupted: (\d+)/.exec(stderr)![1]);
    t.is(records.length, written);
    // Every record is a finished episode, each index once.
    t.is(new Set(records.map((r) => r.index)).size, records.length);
  });
}
