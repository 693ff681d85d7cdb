import test from 'ava';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { readdirSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evalEpisodeCount, formatPaperTable, runPaper, scoreRecords } from '../../src/app/paper.ts';
import { calculator } from '../../scenarios/calculator/index.ts';
import { createMultihopQaScenario } from '../../scenarios/multihop-qa/index.ts';

// The fields scoreRecords reads; the rest of a record does not matter here.
const record = (type: string, metrics: { [k: string]: number }, turns = 2) =>
  ({
    task: { id: `${type}-${turns}`, type },
    outcome: { reward: 0, success: metrics.em === 1, metrics },
    turns: Array(turns).fill({}),
  }) as unknown as EpisodeRecord;

test('scores: EM and F1 overall and per type; recall only where every record reports it', (t) => {
  const rs = [
    record('bridge', { em: 1, f1: 1, recall: 1 }),
    record('bridge', { em: 0, f1: 0.5, recall: 0.5 }, 4),
    record('comparison', { em: 0, f1: 0, recall: 0 }),
  ];
  const s = scoreRecords('GRPO', 'test', rs);
  t.is(s.episodes, 3);
  t.is(s.em, 1 / 3);
  t.is(s.f1, 0.5);
  t.is(s.recall, 0.5);
  t.deepEqual(s.byType.bridge, { n: 2, em: 0.5, f1: 0.75 });
  t.is(s.meanTurns, 8 / 3);
  t.false(
    'recall' in scoreRecords('x', 'test', [record('a', { em: 1, f1: 1 }), record('a', { em: 0, f1: 0, recall: 1 })]),
  );
  t.false('recall' in scoreRecords('x', 'test', []));
});

test('the table shows recall columns when the scores carry recall, and "-" for a missing split', (t) => {
  const test_ = scoreRecords('Base Tool Call', 'test', [record('bridge', { em: 0, f1: 0.2, recall: 0.5 })]);
  const table = formatPaperTable([test_]).split('\n');
  t.regex(table[0]!, /^method\s+test:bridge\s+test EM\s+test F1\s+ood EM\s+ood F1\s+test recall\s+ood recall$/);
  t.regex(table[2]!, /^Base Tool Call\s+0\.0\s+0\.0\s+20\.0\s+-\s+-\s+50\.0\s+-$/);
  const noRecall = formatPaperTable([scoreRecords('Naive RAG', 'test', [record('bridge', { em: 1, f1: 1 })])]);
  t.notRegex(noRecall, /recall/);
});

test("evaluation episodes: 'all' is one per task of a fixed split; a number stays; a generated split has no 'all'", async (t) => {
  const qa = createMultihopQaScenario({ size: 'tiny', seed: '7' });
  for (const split of ['test', 'ood']) {
    const n = evalEpisodeCount(qa, split, 'all');
    const tasks = await qa.tasks({ split, seed: 3, count: n + 10 });
    t.is(tasks.length, n, `${split}: no task beyond the count`);
    t.is(new Set(tasks.map((x) => x.id)).size, n, `${split}: each task once`);
  }
  t.is(evalEpisodeCount(qa, 'test', 12), 12);
  t.throws(() => evalEpisodeCount(calculator, 'test', 'all'), {
    message: /generates its "test" tasks, so "all" has no end; give a number/,
  });
  t.throws(() => evalEpisodeCount(qa, 'nope', 'all'), { message: /unknown split "nope"/ });
});

test('runPaper refuses best-dev selection without dev evals, before any work', async (t) => {
  const outDir = await mkdtemp(join(tmpdir(), 'paper-select-'));
  const warmStart = { demoPolicy: 'expert', episodes: 4, steps: 1, batchSize: 2, lr: 1e-3 };
  await t.throwsAsync(
    runPaper({
      scenario: calculator,
      seed: 1,
      algos: ['grpo'],
      outDir,
      warmStart,
      rl: { evalEvery: 0 },
      select: 'best-dev',
      evalEpisodes: { test: 2, ood: 2 },
      evalSplits: ['test'],
    }),
    { instanceOf: RangeError, message: /selecting the best dev checkpoint needs dev evals: set rl.evalEvery > 0/ },
  );
  t.deepEqual(readdirSync(outDir), [], 'nothing written');
});
