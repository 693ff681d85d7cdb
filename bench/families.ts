/**
 * Every task family (src/app/families.ts) over seeds declared before running: the family's own
 * warm start ("Base Tool Call"), then GRPO and a second algorithm from that warm start, each its
 * best dev checkpoint, evaluated greedily on `test` (and `ood`). Mean ± spread (sample std) per
 * family and method, and each seed's figure, as a table (and with --json one object on the last line).
 *
 *   npx tsx --conditions=source bench/families.ts [--families calculator,gridworld,support-desk,multihop-qa] [--seeds 1,2,3] [--algos grpo,rloo] [--quick] [--out runs/families] [--json]
 *
 * The seeds are those of `agent-r1 start --scenario S --seed N`: each family and seed is the same
 * run as that command (with the extra algorithm beside GRPO). Writes OUT/<family>/seed-N/ per run
 * and OUT/results.json.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { builtinScenarios } from '../scenarios/index.ts';
import { FAMILIES, FAMILY_NAMES } from '../src/app/families.ts';
import { METHOD_NAMES, runPaper, type MethodScore } from '../src/app/paper.ts';
import { makeDir } from '../src/core/make-dir.ts';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import { ALGORITHMS, type Algorithm } from '../src/rl/config.ts';
import { loadScenario } from '../src/scenario/load.ts';

const { values: args } = parseArgs({
  options: {
    families: { type: 'string', default: 'calculator,gridworld,support-desk' },
    seeds: { type: 'string', default: '1,2,3' },
    algos: { type: 'string', default: 'grpo,rloo' },
    quick: { type: 'boolean', default: false },
    out: { type: 'string', default: 'runs/families' },
    json: { type: 'boolean', default: false },
  },
});

const fail = (message: string): never => {
  process.stderr.write(`error: ${message}\n`);
  process.exit(2);
};
const families = args.families!.split(',');
for (const f of families)
  if (!FAMILY_NAMES.includes(f)) fail(`unknown family "${f}"; valid: ${FAMILY_NAMES.join(', ')}`);
const seeds = args.seeds!.split(',').map(Number);
if (seeds.some((s) => !Number.isInteger(s))) fail(`--seeds must be integers, got "${args.seeds}"`);
const algos = args.algos!.split(',') as Algorithm[];
for (const a of algos) if (!ALGORITHMS.includes(a)) fail(`unknown algorithm "${a}"; valid: ${ALGORITHMS.join(', ')}`);

const log = (s: string) => process.stderr.write(`${s}\n`);
const info = await initBackend();
log(
  `backend ${info.name}; families ${families.join(',')}; seeds ${seeds.join(',')} (declared before running); algorithms ${algos.join(',')}`,
);
const t0 = performance.now();
const runs: { family: string; seed: number; scores: MethodScore[]; seconds: { [phase: string]: number } }[] = [];
for (const name of families) {
  const family = FAMILIES[name]!;
  for (const seed of seeds) {
    const scenario = await loadScenario(family.scenario, builtinScenarios, family.options(args.quick!, seed));
    const outDir = join(args.out!, name, `seed-${seed}`);
    makeDir(outDir);
    const result = await runPaper({
      scenario,
      seed,
      algos,
      outDir,
      ...family.budget(args.quick!),
      evalSplits: family.evalSplits,
      references: family.references,
      replica: true,
      onEvent: (e) => {
        if (e.message) log(`[${name} seed ${seed}] ${e.message}`);
      },
    });
    runs.push({ family: name, seed, scores: result.scores, seconds: result.seconds });
    log(`[${name} seed ${seed}] done at ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const std = (xs: number[]) =>
  xs.length < 2 ? 0 : Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / (xs.length - 1));
const figure = (s: MethodScore, metric: 'em' | 'success') => 100 * (metric === 'em' ? s.em : s.successRate);

interface Row {
  family: string;
  split: string;
  method: string;
  perSeed: number[];
  mean: number;
  std: number;
}
const rows: Row[] = [];
for (const name of families) {
  const family = FAMILIES[name]!;
  const mine = runs.filter((r) => r.family === name);
  const methods = [...new Set(mine.flatMap((r) => r.scores.map((s) => s.method)))];
  for (const split of family.evalSplits) {
    for (const method of methods) {
      const perSeed = mine.map((r) => r.scores.find((s) => s.method === method && s.split === split)!);
      if (perSeed.some((s) => s === undefined)) continue;
      const xs = perSeed.map((s) => figure(s, family.metric));
      rows.push({ family: name, split, method, perSeed: xs, mean: mean(xs), std: std(xs) });
    }
  }
}

const gain = (family: string, split: string, algo: Algorithm) => {
  const base = rows.find((r) => r.family === family && r.split === split && r.method === METHOD_NAMES.base);
  const trained = rows.find((r) => r.family === family && r.split === split && r.method === METHOD_NAMES[algo]);
  if (!base || !trained) return null;
  const d = trained.perSeed.map((x, i) => x - base.perSeed[i]!);
  return { mean: mean(d), std: std(d), perSeed: d };
};

const lines = [
  `| family | metric | split | method | ${seeds.map((s) => `seed ${s}`).join(' | ')} | mean ± std |`,
  `|---|---|---|---|${seeds.map(() => '---|').join('')}---|`,
  ...rows.map(
    (r) =>
      `| ${r.family} | ${FAMILIES[r.family]!.metric === 'em' ? 'EM' : 'success'} | ${r.split} | ${r.method} | ${r.perSeed.map((x) => x.toFixed(1)).join(' | ')} | ${r.mean.toFixed(1)} ± ${r.std.toFixed(1)} |`,
  ),
  '',
  '| family | split | algorithm | gain over Base Tool Call (points, mean ± std over seeds) | per seed |',
  '|---|---|---|---|---|',
  ...families.flatMap((f) =>
    FAMILIES[f]!.evalSplits.flatMap((split) =>
      algos.map((a) => {
        const g = gain(f, split, a);
        return g
          ? `| ${f} | ${split} | ${METHOD_NAMES[a]} | ${g.mean.toFixed(1)} ± ${g.std.toFixed(1)} | ${g.perSeed.map((x) => x.toFixed(1)).join(', ')} |`
          : `| ${f} | ${split} | ${METHOD_NAMES[a]} | - | - |`;
      }),
    ),
  ),
];
const seconds = Object.fromEntries(
  runs.map((r) => [`${r.family}/seed-${r.seed}`, Math.round(Object.values(r.seconds).reduce((a, b) => a + b, 0))]),
);
process.stdout.write(`${lines.join('\n')}\n\nseconds per run: ${JSON.stringify(seconds)}\n`);
const result = { families, seeds, algos, quick: args.quick, rows, seconds };
await writeFile(join(args.out!, 'results.json'), `${JSON.stringify(result, null, 2)}\n`);
if (args.json) process.stdout.write(`${JSON.stringify(result)}\n`);
