import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { cli } from '../helpers/cli.ts';

// `rollout --workers 1` with a tool that never yields (a busy loop): the stuck worker thread is
// terminated past its deadline (15 s by default), that episode is an error record that says why,
// and the run goes on to write every other record.

const FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));
const call = (name: string) => `<tool_call>${JSON.stringify({ name, arguments: {} })}</tool_call>`;

test.serial('rollout --workers 1: a busy-looping tool ends as an error record within its deadline', (t) => {
  const out = join(mkdtempSync(join(tmpdir(), 'agent-r1-stuck-')), 'run');
  const scripts = [['<answer>ok</answer>'], [call('spin')], ['<answer>ok</answer>']];
  const started = performance.now();
  const r = cli(
    [
      'rollout',
      ...['--scenario', FAULTY, '--policy', 'script', '--episodes', '3', '--workers', '1', '--out', out, '--json'],
      ...['--option', `scripts=${JSON.stringify(scripts)}`],
    ],
    { timeout: 150_000 },
  );
  const seconds = (performance.now() - started) / 1000;
  t.is(r.code, 0, r.stderr);
  const records = readFileSync(join(out, 'episodes.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { task: { id: string }; status: string; error?: string });
  t.deepEqual(
    records.map((x) => `${x.task.id} ${x.status}`),
    ['f-0 ok', 'f-1 error', 'f-2 ok'],
  );
  t.is(
    records[1]!.error,
    'its worker thread was busy for over 15 s without yielding (scenario code that never returns, e.g. a loop in a tool) and was terminated',
  );
  // One deadline for the pool's thread, one for the episode played alone: well under the 150 s limit.
  t.true(seconds < 100, `${seconds.toFixed(0)} s`);
  t.log(`${seconds.toFixed(1)} s`);
});
