/**
 * The paper's table in miniature: Naive RAG, Base Tool Call (the SFT warm start) and PPO, GRPO,
 * REINFORCE++, RLOO from that warm start, same budget each, on multihop-qa `test` (per question
 * type and overall) and `ood`, mean ± std over seeds; plus the learning curves (dev EM vs RL step)
 * as an SVG rendered with Vega-Lite.
 *
 *   npx tsx --conditions=source bench/paper-table.ts [--seeds 1,2,3] [--algos ppo,grpo,reinforce++,rloo] [--sft-steps 1320] [--train-hops 3] [--eval-episodes 150,75|all] [--select final|best-dev] [--rl '{"steps":20}'] [--train-threads N] [--quick] [--out runs/paper] [--json]
 *   npx tsx --conditions=source bench/paper-table.ts --merge runs/paper-s1,runs/paper-s2 --out runs/paper   # seeds run in parallel
 *
 * Writes OUT/table.md, OUT/learning-curves.svg (dev EM), OUT/reward-curves.svg (training reward),
 * OUT/results.json, and one run directory per seed.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { builtinScenarios } from '../scenarios/index.ts';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import type { Algorithm } from '../src/rl/config.ts';
import { learningCurvesSvg, type CurvePoint } from '../src/rl/learning-curves.ts';
import { METHOD_NAMES, runPaper, type MethodScore } from '../src/app/paper.ts';
import { loadScenario } from '../src/scenario/load.ts';
import { mergeRuns, parsePaperTableArgs, type SeedResult } from './paper-table-options.ts';

const options = parsePaperTableArgs(process.argv.slice(2));
const { seeds, algos, out, merge: merged } = options;
const info = await initBackend(options.backend);
const log = (s: string) => process.stderr.write(s + '\n');
log(
  merged.length > 0
    ? `backend ${info.name}; merging ${merged.join(',')}`
    : `backend ${info.name}; seeds ${seeds.join(',')}; algorithms ${algos.join(',')}${options.quick ? ' (quick budget)' : ''}`,
);
const t0 = performance.now();
let { budget, scenarioOptions } = options;
const results: SeedResult[] = [];
if (merged.length > 0) {
  const merge = await mergeRuns(merged, { budget, scenarioOptions });
  ({ budget, scenarioOptions } = merge);
  results.push(...merge.results);
  seeds.splice(0, seeds.length, ...results.map((r) => r.seed));
}
for (const seed of merged.length > 0 ? [] : seeds) {
  // The world is part of the seed too: each seed is a different generated encyclopedia.
  const scenario = await loadScenario('multihop-qa', builtinScenarios, { seed: String(seed), ...scenarioOptions });
  const result = await runPaper({
    scenario,
    seed,
    algos,
    outDir: join(out, `seed-${seed}`),
    ...budget,
    replica: true,
    trainThreads: options.trainThreads,
    ...(options.warmStart ? { warmStartFrom: options.warmStart } : {}),
    onEvent: (e) => {
      if (e.message) log(`[seed ${seed}] ${e.message}`);
      if (e.step)
        log(
          `[seed ${seed}] ${e.algo} step ${e.step.step}: reward ${e.step.reward.toFixed(3)} EM ${(e.step.outcome.em ?? e.step.success).toFixed(3)}`,
        );
    },
  });
  results.push({ seed, result });
  log(`[seed ${seed}] done at ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const std = (xs: number[]) =>
  xs.length < 2 ? 0 : Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / (xs.length - 1));
const cell = (xs: number[]) =>
  xs.length === 0
    ? '-'
    : xs.length === 1
      ? (100 * xs[0]!).toFixed(1)
      : `${(100 * mean(xs)).toFixed(1)} ± ${(100 * std(xs)).toFixed(1)}`;

const methods = [
  METHOD_NAMES['naive-rag'],
  METHOD_NAMES['oracle-reader'],
  METHOD_NAMES.base,
  ...algos.map((a) => METHOD_NAMES[a]),
];
const all = results.flatMap((r) => r.result.scores);
const pick = (m: string, split: string) => all.filter((s: MethodScore) => s.method === m && s.split === split);
const typesOf = (split: string) =>
  [...new Set(all.filter((s) => s.split === split).flatMap((s) => Object.keys(s.byType)))].sort();
const types = typesOf('test');
const oodTypes = typesOf('ood');
const typeCell = (m: string, split: string, t: string) =>
  cell(pick(m, split).flatMap((s) => (s.byType[t] ? [s.byType[t]!.em] : [])));
const head = [
  'method',
  ...types.map((t) => `test ${t} EM`),
  'test EM',
  'test F1',
  ...oodTypes.map((t) => `ood ${t} EM`),
  'ood EM',
  'ood F1',
];
const rows = methods.map((m) => [
  m,
  ...types.map((t) => typeCell(m, 'test', t)),
  cell(pick(m, 'test').map((s) => s.em)),
  cell(pick(m, 'test').map((s) => s.f1)),
  ...oodTypes.map((t) => typeCell(m, 'ood', t)),
  cell(pick(m, 'ood').map((s) => s.em)),
  cell(pick(m, 'ood').map((s) => s.f1)),
]);
const table = [
  `| ${head.join(' | ')} |`,
  `|${head.map(() => '---').join('|')}|`,
  ...rows.map((r) => `| ${r.join(' | ')} |`),
].join('\n');

// Learning curves: dev EM per eval step, mean ± std over seeds.
const points: CurvePoint[] = [];
for (const algo of algos) {
  const steps = [
    ...new Set(results.flatMap((r) => r.result.curves.filter((c) => c.algo === algo).map((c) => c.step))),
  ].sort((a, b) => a - b);
  for (const step of steps) {
    const ems = results.flatMap((r) =>
      r.result.curves.filter((c) => c.algo === algo && c.step === step).map((c) => c.em),
    );
    points.push({ series: METHOD_NAMES[algo], step, value: mean(ems), spread: std(ems) });
  }
}
// Training reward per step, mean ± std over seeds (every step, so it exists even without evals).
const rewardPoints: CurvePoint[] = [];
for (const algo of algos) {
  const steps = [
    ...new Set(results.flatMap((r) => r.result.rewards.filter((c) => c.algo === algo).map((c) => c.step))),
  ].sort((a, b) => a - b);
  for (const step of steps) {
    const rs = results.flatMap((r) =>
      r.result.rewards.filter((c) => c.algo === algo && c.step === step).map((c) => c.reward),
    );
    rewardPoints.push({ series: METHOD_NAMES[algo], step, value: mean(rs), spread: std(rs) });
  }
}
await mkdir(out, { recursive: true });
const svg = await learningCurvesSvg(points, {
  title: `multihop-qa: dev EM vs RL step (mean ± std over ${seeds.length} seeds)`,
  yTitle: 'dev EM',
});
await writeFile(join(out, 'learning-curves.svg'), svg);
const rewardSvg = await learningCurvesSvg(rewardPoints, {
  title: `multihop-qa: training reward vs RL step (mean ± std over ${seeds.length} seeds)`,
  yTitle: 'mean episode reward',
});
await writeFile(join(out, 'reward-curves.svg'), rewardSvg);
// A merge computes nothing: report what the merged runs spent.
const seconds =
  merged.length > 0
    ? results.reduce((a, { result }) => a + Object.values(result.seconds).reduce((x, y) => x + y, 0), 0)
    : (performance.now() - t0) / 1000;
/** "150", or for "all" the count each seed had: "all (300, 355, 213)". */
const episodesNote = (split: string, n: number | 'all') =>
  n !== 'all'
    ? String(n)
    : `all (${results.map((r) => r.result.scores.find((s) => s.split === split)?.episodes ?? '-').join(', ')})`;
/** Which RL step each seed's agents were evaluated at, when not the final one (best-dev selection). */
const selectionNote = () => {
  const picks = results.map(
    ({ seed, result }) =>
      `seed ${seed}: ${Object.entries(result.selected ?? {})
        .map(([a, s]) => `${METHOD_NAMES[a as Algorithm]} ${s.step}`)
        .join(', ')}`,
  );
  return budget.select === 'best-dev'
    ? `; RL agents = their best dev checkpoint (${budget.rl.evalEpisodes} dev episodes), step per seed — ${picks.join('; ')}`
    : '';
};
const note =
  `seeds ${seeds.join(', ')}; ${budget.rl.steps} RL steps × ${budget.rl.tasksPerStep} tasks × group ${budget.rl.group} per algorithm (lr ${budget.rl.lr}, minibatch ${budget.rl.minibatch}); ` +
  `warm start ${budget.warmStart.steps} SFT steps on ${budget.warmStart.episodes} noisy-expert demonstrations; train questions up to ${scenarioOptions.trainHops} hops; ` +
  `test ${episodesNote('test', budget.evalEpisodes.test)} / ood ${episodesNote('ood', budget.evalEpisodes.ood)} episodes, greedy${selectionNote()}; ${seconds.toFixed(0)} s on backend ${info.name}${merged.length > 0 ? ` (summed over the ${merged.length} merged runs)` : ''}`;
await writeFile(join(out, 'table.md'), `${table}\n\n${note}\n`);
await writeFile(
  join(out, 'results.json'),
  JSON.stringify({ seeds, algos, budget, scenarioOptions, seconds, results }, null, 2) + '\n',
);
process.stdout.write(
  `${table}\n\n${note}\nfiles: ${join(out, 'table.md')}, ${join(out, 'learning-curves.svg')}, ${join(out, 'reward-curves.svg')}\n`,
);
if (options.json)
  process.stdout.write(
    JSON.stringify({ rows: Object.fromEntries(rows.map((r) => [r[0], r.slice(1)])), seconds }) + '\n',
  );
