import { z } from 'zod';
import { UnknownNameError, defineScenario, type Scenario } from 'agent-r1-ts';
import { createQaEnv, parseRewardOption, type QaTask } from './env.ts';
import { DEFAULT_NOISY_RATES, qaPolicies } from './policies.ts';
import { sampleTasks, WORLD_SPLITS, worldTasks, type WorldTasks } from './questions.ts';
import { createCorpus, type SearchCorpus } from './search.ts';
import { searchTool, type QaState } from './search-tool.ts';
import { qaSummarizer } from './summarizer.ts';
import { generateWorld, WORLD_SIZES, type World } from './world.ts';

export const MULTIHOP_QA_VERSION = '1.0.0';

/** Scenario options (all strings, as the CLI passes them). */
const optionsSchema = z
  .object({
    seed: z
      .string()
      .regex(/^-?\d+$/, 'seed must be an integer')
      .default('1'),
    size: z.enum(Object.keys(WORLD_SIZES) as [string, ...string[]]).default('small'),
    /** JSON object overriding reward weights, e.g. {"goldDocument":0.2}. */
    rewards: z.string().optional(),
    /** Per-episode error rates of the noisy-expert policy. */
    noisyEarly: z
      .string()
      .regex(/^(0(\.\d+)?|1(\.0+)?)$/, 'a probability in [0, 1]')
      .optional(),
    noisyDistractor: z
      .string()
      .regex(/^(0(\.\d+)?|1(\.0+)?)$/, 'a probability in [0, 1]')
      .optional(),
    /** The longest chain `train` asks: 2 (as dev and test) or 3 (adds 3-hop questions on train entities). */
    trainHops: z.enum(['2', '3']).optional(),
  })
  .strict();

export interface WorldBundle {
  world: World;
  corpus: SearchCorpus;
  tasks: WorldTasks;
}

// Worker threads load the scenario themselves; generating a world takes milliseconds, but keep one
// per (seed, size) per thread, and its tasks per trainHops.
const worlds = new Map<string, Omit<WorldBundle, 'tasks'>>();
const bundles = new Map<string, WorldBundle>();

export function loadWorld(seed: number, size: string, trainHops: 2 | 3 = 2): WorldBundle {
  const key = `${seed}|${size}`;
  let bundle = bundles.get(`${key}|${trainHops}`);
  if (!bundle) {
    let made = worlds.get(key);
    if (!made) {
      const world = generateWorld(seed, size);
      made = { world, corpus: createCorpus(`world:${world.hash}`, world.documents) };
      worlds.set(key, made);
    }
    bundle = { ...made, tasks: worldTasks(made.world, { trainHops }) };
    bundles.set(`${key}|${trainHops}`, bundle);
  }
  return bundle;
}

/**
 * The generated multi-hop QA world: encyclopedia documents about people, films, novels, companies,
 * cities and countries, searched with BM25, with HotpotQA/2Wiki-style questions in train/dev/test
 * and MuSiQue-style 3-4 hop chains in ood.
 */
export function createMultihopQaScenario(options: { [key: string]: string } = {}): Scenario<QaTask, QaState> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) throw new Error(`multihop-qa options: ${z.prettifyError(parsed.error)}`);
  const opts = parsed.data;
  const seed = Number(opts.seed);
  const { world, corpus, tasks } = loadWorld(seed, opts.size, opts.trainHops === '3' ? 3 : 2);
  const corpusFor = () => corpus;
  const rates = {
    early: opts.noisyEarly === undefined ? DEFAULT_NOISY_RATES.early : Number(opts.noisyEarly),
    distractor: opts.noisyDistractor === undefined ? DEFAULT_NOISY_RATES.distractor : Number(opts.noisyDistractor),
  };
  const recorded: { [key: string]: string } = { seed: opts.seed, size: opts.size };
  if (opts.rewards !== undefined) recorded.rewards = opts.rewards;
  if (opts.noisyEarly !== undefined) recorded.noisyEarly = opts.noisyEarly;
  if (opts.noisyDistractor !== undefined) recorded.noisyDistractor = opts.noisyDistractor;
  // trainHops 2 is the default's very tasks: recorded as absent, so its records equal the default's
  if (opts.trainHops === '3') recorded.trainHops = opts.trainHops;
  const counts = WORLD_SPLITS.map((s) => `${s} ${tasks[s].length}`).join(', ');
  const poolOf = (split: string) => {
    if (!(WORLD_SPLITS as readonly string[]).includes(split)) throw new UnknownNameError('split', split, WORLD_SPLITS);
    return tasks[split as keyof WorldTasks];
  };
  return {
    id: 'multihop-qa',
    // the world's content hash is part of the version: records say exactly which world they saw
    version: `${MULTIHOP_QA_VERSION}+world.${world.hash}`,
    description:
      `Multi-hop QA over a generated encyclopedia (seed ${seed}, size ${opts.size}: ${world.entities.length} documents, ` +
      `world hash ${world.hash}; tasks: ${counts}). One tool: BM25 search.`,
    splits: WORLD_SPLITS,
    options: recorded,
    tasks: ({ split, seed: taskSeed, count }) => sampleTasks(poolOf(split), taskSeed, count, `multihop-qa:${split}`),
    taskCount: (split) => poolOf(split).length,
    tools: [searchTool],
    env: createQaEnv({ corpusFor, rewards: parseRewardOption(opts.rewards) }),
    policies: qaPolicies(corpusFor, rates),
    episode: { maxTurns: 8 },
    summarizer: qaSummarizer,
  };
}

export default defineScenario((options: { [key: string]: string }) => createMultihopQaScenario(options));
