import test from 'ava';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';

// `eval --pass-k K`: each task runs K times with derived seeds; the summary reports τ-bench's
// pass^k and pass@k, the same to the digit on every re-run and for any number of workers.

const SCENARIO = ['--scenario', 'gridworld', '--option', 'size=large', '--policy', 'noisy-expert'];

test.serial(
  '--pass-k runs each task K times and reports pass^k and pass@k, the same on a re-run and on workers',
  (t) => {
    const out = mkdtempSync(join(tmpdir(), 'agent-r1-pass-k-'));
    const run = (workers: number, dir?: string) => {
      const args = ['eval', ...SCENARIO, '--episodes', '6', '--pass-k', '3', '--workers', String(workers), '--json'];
      const result = cli(dir ? [...args, '--out', dir] : args);
      t.is(result.code, 0, result.stderr);
      return result.lastJson();
    };
    const first = run(0, out);
    t.is(first.episodes, 18);
    t.deepEqual(Object.keys(first.passK), ['k=1', 'k=2', 'k=3']);
    const near = (actual: number, expected: number) =>
      t.true(Math.abs(actual - expected) < 1e-12, `${actual} ≠ ${expected}`);
    near(first.passK['k=1']['pass^k'], first.successRate);
    near(first.passK['k=1']['pass@k'], first.successRate);
    t.regex(first.passKNote, /6 tasks × 3 runs; exact/);

    // The records: three runs of each task, with seeds of their own; pass^3 from them by hand.
    const records = readFileSync(join(out, 'episodes.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const byTask = new Map<string, { seed: number; success: boolean }[]>();
    for (const r of records)
      byTask.set(r.task.id, [...(byTask.get(r.task.id) ?? []), { seed: r.seed, success: r.outcome.success }]);
    t.is(byTask.size, 6);
    for (const runs of byTask.values()) {
      t.is(runs.length, 3);
      t.is(new Set(runs.map((r) => r.seed)).size, 3, 'each run its own seed');
    }
    const allSucceed = [...byTask.values()].filter((runs) => runs.every((r) => r.success)).length / 6;
    const anySucceeds = [...byTask.values()].filter((runs) => runs.some((r) => r.success)).length / 6;
    near(first.passK['k=3']['pass^k'], allSucceed);
    near(first.passK['k=3']['pass@k'], anySucceeds);
    t.true(allSucceed < first.successRate && first.successRate < anySucceeds, 'a noisy policy: the three differ');

    t.deepEqual(run(0).passK, first.passK, 'a re-run: the same figures');
    t.deepEqual(run(2).passK, first.passK, 'on two workers: the same figures');
  },
);

test.serial('--pass-k refuses 0, --group, --queue and --agent, naming the flag', (t) => {
  const zero = cli(['eval', ...SCENARIO, '--pass-k', '0']);
  t.is(zero.code, 2);
  t.regex(zero.stderr, /--pass-k/);
  const group = cli(['eval', ...SCENARIO, '--pass-k', '3', '--group', '2']);
  t.is(group.code, 2);
  t.regex(group.stderr, /--pass-k K runs each task K times: not with --group/);
  const queue = cli(['eval', ...SCENARIO, '--pass-k', '3', '--queue', 'redis://127.0.0.1:1']);
  t.is(queue.code, 2);
  t.regex(queue.stderr, /--pass-k: not with --queue/);
  const agent = cli(['eval', '--agent', 'agent.ts', '--tasks', 'tasks.jsonl', '--pass-k', '3']);
  t.is(agent.code, 2);
  t.regex(agent.stderr, /--pass-k/);
});
