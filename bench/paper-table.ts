/**
 * The paper's table in miniature: Naive RAG, Base Tool Call (the SFT warm start) and PPO, GRPO,
 * REINFORCE++, RLOO from that warm start, same budget each, on multihop-qa `test` (per question
 * type and overall) and `ood`, mean ± std over seeds; plus the learning curves (dev EM vs RL step)
 * as an SVG rendered with Vega-Lite.
 *
 *   npx tsx --conditions=source bench/paper-table.ts [--seeds 1,2,3] [--algos ppo,grpo,reinforce++,rloo] [--sft-steps 1320] [--train-hops 3] [--eval-episodes 150,75|all] [--select final|best-dev] [--rl '{"steps":20}'] [--quick] [--out runs/paper] [--json]
 *   npx tsx --conditions=source bench/paper-table.ts --merge runs/paper-s1,runs/paper-s2 --out runs/paper   # seeds run in parallel
 *
 * Writes OUT/table.md, OUT/learning-curves.svg (dev EM), OUT/reward-curves.svg (training reward),
 * OUT/results.json, and one run directory per seed.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { builtinScenarios } from '../scenarios/index.ts';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import { ALGORITHMS, resolveConfig, TrainConfigSchema, type Algorithm, type TrainConfig } from '../src/rl/config.ts';
import { learningCurvesSvg, type CurvePoint } from '../src/rl/learning-curves.ts';
import {
  METHOD_NAMES,
  runPaper,
  type MethodScore,
  type PaperOptions,
  type PaperResult,
  type PolicySelection,
} from '../src/app/paper.ts';
import { loadScenario } from '../src/scenario/load.ts';
import { START_SCENARIO_OPTIONS, startBudget } from '../src/app/start.ts';

const { values: args } = parseArgs({
  options: {
    seeds: { type: 'string', default: '1,2,3' },
    algos: { type: 'string', default: ALGORITHMS.join(',') },
    out: { type: 'string', default: 'runs/paper' },
    quick: { type: 'boolean', default: false },
    backend: { type: 'string' },
    json: { type: 'boolean', default: false },
    /** Comma-separated OUT directories of earlier runs (e.g. one seed each, run in parallel): build the table from their results.json. */
    merge: { type: 'string' },
    /** A warm-start checkpoint of an earlier run with the same seed and budget (one seed only): skips the SFT. */
    'warm-start': { type: 'string' },
    /**
     * SFT steps of the warm start. The table has its own budget, three times npm start's 440: at 440
     * steps the reader is so weak that even a perfect imitation of the expert scores ~Base + 19 EM,
     * which leaves RL no room to show (measured; docs/experiments.md, "Where the ceiling is").
     */
    'sft-steps': { type: 'string', default: '1320' },
    /**
     * The longest chain the train split asks (scenario option trainHops). 3 (the table's default):
     * some train questions are 3-hop, so the agents can learn to search past two hops; dev/test stay
     * 2-hop, ood 3-4 hop on held-out entities. With 2, no agent ever saw a chain longer than two and
     * every method tied on ood (measured; docs/experiments.md).
     */
    'train-hops': { type: 'string', default: '3' },
    /**
     * Evaluation episodes, "TEST,OOD" (npm start's 150,75 by default) or "all": every task of each
     * seed's test and ood splits once (a few hundred per world), which cuts the sampling noise.
     */
    'eval-episodes': { type: 'string' },
    /**
     * Which policy of each RL run is evaluated: "final" (the last step's) or "best-dev" (the best
     * dev eval after step 0; ties to the later step). Selection sees dev only, never test or ood.
     */
    select: { type: 'string', default: 'final' },
    /** RL settings for every algorithm on top of npm start's, as JSON: '{"steps":20,"lr":6e-4}' (TrainConfig fields). */
    rl: { type: 'string' },
  },
});
const seeds = args.seeds!.split(',').map(Number);
if (seeds.some((s) => !Number.isInteger(s))) throw new Error(`--seeds must be integers, got ${args.seeds}`);
const algos = args.algos!.split(',') as Algorithm[];
for (const a of algos)
  if (!(ALGORITHMS as readonly string[]).includes(a))
    throw new Error(`unknown algorithm ${a}; valid: ${ALGORITHMS.join(', ')}`);

const start = startBudget(args.quick!);
const sftSteps = Number(args['sft-steps']);
if (!Number.isInteger(sftSteps) || sftSteps < 1)
  throw new Error(`--sft-steps must be a positive integer, got ${args['sft-steps']}`);
if (args['train-hops'] !== '2' && args['train-hops'] !== '3')
  throw new Error(`--train-hops must be 2 or 3, got ${args['train-hops']}`);
if (args.select !== 'final' && args.select !== 'best-dev')
  throw new Error(`--select must be final or best-dev, got ${args.select}`);
let scenarioOptions = { ...START_SCENARIO_OPTIONS, trainHops: args['train-hops'] };
let budget = {
  ...start,
  evalEpisodes: evalEpisodesFlag(args['eval-episodes']) ?? start.evalEpisodes,
  // --quick keeps the CI-sized warm start; otherwise the table's own SFT budget.
  warmStart: args.quick ? start.warmStart : { ...start.warmStart, steps: sftSteps },
  rl: { ...start.rl, ...rlOverrides(args.rl) },
  select: args.select as PolicySelection,
};
if (budget.select === 'best-dev' && resolveConfig({ ...budget.rl, algo: 'grpo' }).evalEvery === 0)
  throw new Error('--select best-dev needs dev evals: --rl evalEvery must be > 0');

/** --eval-episodes: "all", or two positive integers "TEST,OOD". */
function evalEpisodesFlag(flag: string | undefined): PaperOptions['evalEpisodes'] | undefined {
  if (flag === undefined) return undefined;
  if (flag === 'all') return { test: 'all', ood: 'all' };
  const m = /^([1-9][0-9]*),([1-9][0-9]*)$/.exec(flag);
  if (!m) throw new Error(`--eval-episodes must be "all" or two positive integers TEST,OOD (e.g. 150,75), got ${flag}`);
  return { test: Number(m[1]), ood: Number(m[2]) };
}

/** --rl's JSON, checked before hours of SFT: known TrainConfig fields only, valid values. */
function rlOverrides(json: string | undefined): Partial<TrainConfig> {
  if (json === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (e) {
    throw new Error(`--rl must be JSON, e.g. '{"steps":20}': ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error(`--rl must be a JSON object, got ${json}`);
  const unknown = Object.keys(parsed).filter((k) => !(k in TrainConfigSchema.shape) || k === 'algo' || k === 'seed');
  if (unknown.length > 0)
    throw new Error(
      `--rl: unknown or fixed fields ${unknown.join(', ')} (algo and seed come from --algos and --seeds)`,
    );
  resolveConfig({ ...start.rl, ...parsed, algo: 'grpo' });
  return parsed as Partial<TrainConfig>;
}
const info = await initBackend(args.backend);
const log = (s: string) => process.stderr.write(s + '\n');
log(
  args.merge
    ? `backend ${info.name}; merging ${args.merge}`
    : `backend ${info.name}; seeds ${seeds.join(',')}; algorithms ${algos.join(',')}${args.quick ? ' (quick budget)' : ''}`,
);
const results: { seed: number; result: PaperResult }[] = [];
const t0 = performance.now();
const merged: string[] = args.merge ? args.merge.split(',') : [];
for (const [i, dir] of merged.entries()) {
  const earlier = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8')) as {
    budget?: typeof budget;
    scenarioOptions?: typeof scenarioOptions;
    results: { seed: number; result: PaperResult }[];
  };
  // A merged table reports the settings its runs used; runs of different settings are not one table.
  const agreed = <T>(value: T, current: T, what: string): T => {
    if (i > 0 && JSON.stringify(value) !== JSON.stringify(current))
      throw new Error(`${dir} was run with ${what} than ${merged[0]}; not merging`);
    return value;
  };
  // runs before trainHops existed trained on 2-hop questions only
  const options = earlier.scenarioOptions ?? { ...START_SCENARIO_OPTIONS, trainHops: '2' };
  scenarioOptions = agreed(options, scenarioOptions, `other scenario options (${JSON.stringify(options)})`);
  // runs before --select existed evaluated the final policy
  if (earlier.budget)
    budget = agreed({ ...earlier.budget, select: earlier.budget.select ?? 'final' }, budget, 'a different budget');
  for (const { seed, result } of earlier.results) {
    // Runs of one seed (one algorithm each, same deterministic baselines) become one result.
    const same = results.find((r) => r.seed === seed);
    if (!same) results.push({ seed, result: structuredClone(result) });
    else {
      const has = new Set(same.result.scores.map((x) => `${x.method}\u0000${x.split}`));
      same.result.scores.push(...result.scores.filter((x) => !has.has(`${x.method}\u0000${x.split}`)));
      same.result.curves.push(...result.curves);
      same.result.rewards.push(...result.rewards);
      // the first run's scores are kept for a method both have, so its selection too
      same.result.selected = { ...result.selected, ...same.result.selected };
      // compute spent, phase by phase (each run evaluated the baselines again)
      for (const [phase, s] of Object.entries(result.seconds))
        same.result.seconds[phase] = (same.result.seconds[phase] ?? 0) + s;
    }
  }
}
if (merged.length > 0) seeds.splice(0, seeds.length, ...results.map((r) => r.seed));
for (const seed of merged.length > 0 ? [] : seeds) {
  // The world is part of the seed too: each seed is a different generated encyclopedia.
  const scenario = await loadScenario('multihop-qa', builtinScenarios, { seed: String(seed), ...scenarioOptions });
  const result = await runPaper({
    scenario,
    seed,
    algos,
    outDir: join(args.out!, `seed-${seed}`),
    ...budget,
    replica: true,
    ...(args['warm-start'] ? { warmStartFrom: args['warm-start'] } : {}),
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
await mkdir(args.out!, { recursive: true });
const svg = await learningCurvesSvg(points, {
  title: `multihop-qa: dev EM vs RL step (mean ± std over ${seeds.length} seeds)`,
  yTitle: 'dev EM',
});
await writeFile(join(args.out!, 'learning-curves.svg'), svg);
const rewardSvg = await learningCurvesSvg(rewardPoints, {
  title: `multihop-qa: training reward vs RL step (mean ± std over ${seeds.length} seeds)`,
  yTitle: 'mean episode reward',
});
await writeFile(join(args.out!, 'reward-curves.svg'), rewardSvg);
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
await writeFile(join(args.out!, 'table.md'), `${table}\n\n${note}\n`);
await writeFile(
  join(args.out!, 'results.json'),
  JSON.stringify({ seeds, algos, budget, scenarioOptions, seconds, results }, null, 2) + '\n',
);
process.stdout.write(
  `${table}\n\n${note}\nfiles: ${join(args.out!, 'table.md')}, ${join(args.out!, 'learning-curves.svg')}, ${join(args.out!, 'reward-curves.svg')}\n`,
);
if (args.json)
  process.stdout.write(
    JSON.stringify({ rows: Object.fromEntries(rows.map((r) => [r[0], r.slice(1)])), seconds }) + '\n',
  );
