import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, paperTable } from '../helpers/cli.ts';

// The main job's CI variant end to end: world → SFT warm start → GRPO → table, then
// bench/paper-table.ts from its warm start. Slow (npm run test:slow): 3 CPU-minutes, 4.5 min wall at
// load 5-9 on 2 cores.
test('npm start -- --quick trains, shows the reward rising, and prints the table', async (t) => {
  t.timeout(15 * 60_000);
  const out = join(await mkdtemp(join(tmpdir(), 'start-quick-')), 'run');
  const r = cli(['start', '--quick', '--out', out], { timeout: 15 * 60_000 });
  t.is(r.code, 0, r.stderr.slice(-2000));
  t.log(r.stdout);
  for (const method of ['Naive RAG', 'Base Tool Call', 'GRPO']) t.regex(r.stdout, new RegExp(`^${method}\\s`, 'm'));
  t.regex(r.stdout, /test EM\s+test F1\s+ood EM\s+ood F1\s+test recall\s+ood recall/);
  t.true(r.stdout.includes(`run directory: ${out}`));
  const m = /mean reward, first half → second half: (-?[\d.]+) → (-?[\d.]+)/.exec(r.stdout);
  t.truthy(m);
  t.true(Number(m![2]) > Number(m![1]), `reward ${m![1]} → ${m![2]}`);
  const metrics = readFileSync(join(out, 'grpo', 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.is(metrics.filter((x) => x.kind === 'step').length, 8);
  t.true(existsSync(join(out, 'grpo', 'final', 'model.json')));
  t.true(existsSync(join(out, 'warm-start', 'model.json')));

  // bench/paper-table.ts from that warm start (--warm-start: another process, no SFT) plays the
  // very same Base Tool Call episodes: byte-identical records, so equal digests. It evaluates the
  // RL agent's best dev checkpoint (dev evals at steps 1 and 2).
  const benchOut = join(out, '..', 'bench');
  const args = [
    '--quick',
    '--seeds',
    '1',
    '--algos',
    'rloo',
    '--train-hops',
    '2',
    '--warm-start',
    join(out, 'warm-start'),
    '--select',
    'best-dev',
    '--rl',
    '{"steps":2,"evalEvery":1,"checkpointEvery":2}',
    '--out',
    benchOut,
  ];
  const b = paperTable(args, { timeout: 10 * 60_000 });
  t.is(b.code, 0, b.stderr.slice(-2000));
  t.regex(b.stderr, /warm start loaded from .*warm-start/);
  t.regex(b.stdout, /^\| RLOO \|/m);
  type Score = { method: string; split: string; digest?: string };
  const base = (scores: Score[]) => scores.filter((x) => x.method === 'Base Tool Call').map((x) => [x.split, x.digest]);
  const started = JSON.parse(readFileSync(join(out, 'paper.json'), 'utf8')) as { scores: Score[] };
  const benched = JSON.parse(readFileSync(join(benchOut, 'results.json'), 'utf8')) as {
    results: { result: { scores: Score[] } }[];
  };
  t.is(base(started.scores).length, 2);
  t.true(base(started.scores).every(([, d]) => typeof d === 'string'));
  t.deepEqual(base(benched.results[0]!.result.scores), base(started.scores));
  // the selection: the best dev eval after step 0, ties to the later step; the table's note names it
  type Result = {
    curves: { algo: string; step: number; em: number }[];
    selected: { [a: string]: { step: number; devScore: number } };
  };
  const result = benched.results[0]!.result as unknown as Result;
  const trained = result.curves.filter((c) => c.algo === 'rloo' && c.step > 0);
  t.deepEqual(
    trained.map((c) => c.step),
    [1, 2],
  );
  const top = Math.max(...trained.map((c) => c.em));
  t.deepEqual(result.selected.rloo, { step: trained.filter((c) => c.em === top).at(-1)!.step, devScore: top });
  t.regex(
    b.stdout,
    new RegExp(`best dev checkpoint \\(16 dev episodes\\), step per seed — seed 1: RLOO ${result.selected.rloo!.step}`),
  );
});
