/**
 * bench/paper-table.ts's flags and its --merge of earlier runs, apart from the script so that a wrong
 * flag or an unmergeable run is refused before hours of SFT (and tested without running any).
 */
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { PaperOptions, PaperResult, PolicySelection } from '../src/app/paper.ts';
import { START_SCENARIO_OPTIONS, startBudget } from '../src/app/start.ts';
import { ALGORITHMS, resolveConfig, TrainConfigSchema, type Algorithm, type TrainConfig } from '../src/rl/config.ts';

export type PaperTableBudget = ReturnType<typeof startBudget> & { select: PolicySelection };
export type PaperTableScenarioOptions = typeof START_SCENARIO_OPTIONS & { trainHops: string };
export interface SeedResult {
  seed: number;
  result: PaperResult;
}

export interface PaperTableOptions {
  seeds: number[];
  algos: Algorithm[];
  out: string;
  quick: boolean;
  backend?: string;
  json: boolean;
  /** OUT directories of earlier runs to build the table from (empty: run). */
  merge: string[];
  warmStart?: string;
  /** Threads computing the SFT and RL gradients (the weights do not depend on it). */
  trainThreads: number;
  budget: PaperTableBudget;
  scenarioOptions: PaperTableScenarioOptions;
}

/** The script's flags, checked: an Error naming the flag for anything it cannot run. */
export function parsePaperTableArgs(argv: string[]): PaperTableOptions {
  const { values: args } = parseArgs({
    args: argv,
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
      /** Threads computing the SFT and RL gradients (default: one per core, as npm start); the weights are the same for any number. */
      'train-threads': { type: 'string' },
      /** RL settings for every algorithm on top of npm start's, as JSON: '{"steps":20,"lr":6e-4}' (TrainConfig fields). */
      rl: { type: 'string' },
    },
  });
  const seeds = args.seeds.split(',').map(Number);
  if (seeds.some((s) => !Number.isInteger(s))) throw new Error(`--seeds must be integers, got ${args.seeds}`);
  const algos = args.algos.split(',') as Algorithm[];
  for (const a of algos)
    if (!(ALGORITHMS as readonly string[]).includes(a))
      throw new Error(`unknown algorithm ${a}; valid: ${ALGORITHMS.join(', ')}`);
  const start = startBudget(args.quick);
  const sftSteps = Number(args['sft-steps']);
  if (!Number.isInteger(sftSteps) || sftSteps < 1)
    throw new Error(`--sft-steps must be a positive integer, got ${args['sft-steps']}`);
  if (args['train-hops'] !== '2' && args['train-hops'] !== '3')
    throw new Error(`--train-hops must be 2 or 3, got ${args['train-hops']}`);
  const trainThreads = args['train-threads'] === undefined ? availableParallelism() : Number(args['train-threads']);
  if (!Number.isInteger(trainThreads) || trainThreads < 1)
    throw new Error(`--train-threads must be a positive integer, got ${args['train-threads']}`);
  if (args.select !== 'final' && args.select !== 'best-dev')
    throw new Error(`--select must be final or best-dev, got ${args.select}`);
  const budget: PaperTableBudget = {
    ...start,
    evalEpisodes: evalEpisodesFlag(args['eval-episodes']) ?? start.evalEpisodes,
    // --quick keeps the CI-sized warm start; otherwise the table's own SFT budget.
    warmStart: args.quick ? start.warmStart : { ...start.warmStart, steps: sftSteps },
    rl: { ...start.rl, ...rlOverrides(args.rl, start.rl) },
    select: args.select,
  };
  if (budget.select === 'best-dev' && resolveConfig({ ...budget.rl, algo: 'grpo' }).evalEvery === 0)
    throw new Error('--select best-dev needs dev evals: --rl evalEvery must be > 0');
  return {
    seeds,
    algos,
    out: args.out,
    quick: args.quick,
    backend: args.backend,
    json: args.json,
    merge: args.merge ? args.merge.split(',') : [],
    warmStart: args['warm-start'],
    trainThreads,
    budget,
    scenarioOptions: { ...START_SCENARIO_OPTIONS, trainHops: args['train-hops'] },
  };
}

/** --eval-episodes: "all", or two positive integers "TEST,OOD". */
function evalEpisodesFlag(flag: string | undefined): PaperOptions['evalEpisodes'] | undefined {
  if (flag === undefined) return undefined;
  if (flag === 'all') return { test: 'all', ood: 'all' };
  const m = /^([1-9][0-9]*),([1-9][0-9]*)$/.exec(flag);
  if (!m) throw new Error(`--eval-episodes must be "all" or two positive integers TEST,OOD (e.g. 150,75), got ${flag}`);
  return { test: Number(m[1]), ood: Number(m[2]) };
}

/** --rl's JSON, checked before hours of SFT: known TrainConfig fields only, valid values. */
function rlOverrides(json: string | undefined, base: Partial<TrainConfig>): Partial<TrainConfig> {
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
  resolveConfig({ ...base, ...parsed, algo: 'grpo' });
  return parsed as Partial<TrainConfig>;
}

/**
 * The results of earlier runs (their OUT/results.json), one result per seed, with the settings they
 * were run with: runs of different budgets or scenario options are not one table (an Error says which).
 */
export async function mergeRuns(
  dirs: readonly string[],
  defaults: { budget: PaperTableBudget; scenarioOptions: PaperTableScenarioOptions },
): Promise<{ results: SeedResult[]; budget: PaperTableBudget; scenarioOptions: PaperTableScenarioOptions }> {
  let { budget, scenarioOptions } = defaults;
  const results: SeedResult[] = [];
  for (const [i, dir] of dirs.entries()) {
    const earlier = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8')) as {
      budget?: Omit<PaperTableBudget, 'select'> & { select?: PolicySelection };
      scenarioOptions?: PaperTableScenarioOptions;
      results: SeedResult[];
    };
    // A merged table reports the settings its runs used; runs of different settings are not one table.
    const agreed = <T>(value: T, current: T, what: string): T => {
      if (i > 0 && JSON.stringify(value) !== JSON.stringify(current))
        throw new Error(`${dir} was run with ${what} than ${dirs[0]}; not merging`);
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
  return { results, budget, scenarioOptions };
}
