import { defineScenario, type EpisodeRecord, type Scenario, type Summarizer, type Task } from 'agent-r1-ts';
import { compactSystemPrompt, deskEnv, supportDeskEnv, terseSystemPrompt } from './env.ts';
import { orderMachine } from './order-machine.ts';
import { DEFAULT_NOISY_SKIP, DESK_NOISY_KINDS, type DeskNoisyKind, expert, noisyExpert, reckless } from './policies.ts';
import { DEFAULT_CUSTOMERS, MAX_CUSTOMERS } from './db.ts';
import { generateTasks, SPLITS } from './tasks.ts';
import { supportDeskTools } from './tools.ts';
import type { DeskState } from './world.ts';

/** What the summary takes from one record (see Summarizer.digest). */
type DeskDigest = { type: string; success: boolean; violations: number; identifiedFirst: number };

/** Per request type: episodes, success rate and rule violations per episode. */
function summarizer(): Summarizer<{ [key: string]: unknown }, DeskDigest> {
  let n = 0;
  let violations = 0;
  let identifiedFirst = 0;
  const types = new Map<string, { n: number; success: number; violations: number }>();
  return {
    digest: (record: EpisodeRecord): DeskDigest => ({
      type: record.task.type ?? 'unknown',
      success: record.outcome.success,
      violations: record.outcome.metrics?.['violations'] ?? 0,
      identifiedFirst: record.outcome.metrics?.['identified_first'] ?? 0,
    }),
    add(d) {
      n++;
      violations += d.violations;
      identifiedFirst += d.identifiedFirst;
      let sums = types.get(d.type);
      if (!sums) types.set(d.type, (sums = { n: 0, success: 0, violations: 0 }));
      sums.n++;
      sums.success += d.success ? 1 : 0;
      sums.violations += d.violations;
    },
    result() {
      const byType: { [type: string]: { n: number; success: number; violations: number } } = {};
      for (const type of [...types.keys()].sort()) {
        const sums = types.get(type)!;
        byType[type] = { n: sums.n, success: sums.success / sums.n, violations: sums.violations / sums.n };
      }
      const m = Math.max(1, n);
      return { byType, violationsPerEpisode: violations / m, identifiedFirstRate: identifiedFirst / m };
    },
  };
}

/** The support desk as it has always been (no options). */
export const supportDesk: Scenario<Task, DeskState> = {
  id: 'support-desk',
  version: '1',
  description:
    "A store's customer support desk on a real SQLite database (customers, orders, items, payments, refunds) with a policy of rules; " +
    'outcome = the final database equals the expected one.',
  splits: SPLITS,
  options: {},
  tasks: ({ split, seed, count }) => generateTasks(split, seed, count),
  tools: supportDeskTools,
  env: supportDeskEnv,
  policies: { expert: () => expert, reckless: () => reckless },
  worldMachine: orderMachine,
  episode: { maxTurns: 10, maxTokensPerTurn: 256, maxTotalTokens: 4096 },
  summarizer,
};

const PROMPTS = { full: undefined, compact: compactSystemPrompt, terse: terseSystemPrompt };

/**
 * Options: `prompt=compact` names the tools by their signatures instead of their JSON schemas (for a
 * small model that reads the prompt at every step), `prompt=terse` also puts the policy in one line
 * (for a model trained from scratch); `customers` (default 60) sizes the world: a larger one has
 * the same first customers and more in each split, so a model cannot learn the train split's
 * names, addresses and item ids by heart; `noisySkip` (default 0.7) is the share of the
 * `noisy-expert`'s episodes that go wrong, `noisyKind` how: `no-identify` (it acts before
 * identifying the customer), `early` (it answers before making the change) or `both` (half each, the
 * default). Given any, the scenario offers the noisy expert.
 */
export default defineScenario((options: { [key: string]: string }): Scenario<Task, DeskState> => {
  const { prompt = 'full', customers: customersOption, noisySkip, noisyKind = 'both', ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0)
    throw new Error(`support-desk: unknown option ${unknown[0]}; valid: prompt, customers, noisySkip, noisyKind`);
  if (!Object.hasOwn(PROMPTS, prompt))
    throw new Error(`support-desk: prompt must be full, compact or terse, got "${prompt}"`);
  if (!(DESK_NOISY_KINDS as readonly string[]).includes(noisyKind))
    throw new Error(`support-desk: noisyKind must be ${DESK_NOISY_KINDS.join(', ')}, got "${noisyKind}"`);
  const customers = customersOption === undefined ? DEFAULT_CUSTOMERS : Number(customersOption);
  if ((customersOption !== undefined && !/^\d+$/.test(customersOption)) || customers < 5 || customers > MAX_CUSTOMERS)
    throw new Error(`support-desk: customers must be an integer from 5 to ${MAX_CUSTOMERS}, got "${customersOption}"`);
  if (Object.keys(options).length === 0) return supportDesk;
  const rate = noisySkip === undefined ? DEFAULT_NOISY_SKIP : Number(noisySkip);
  if (noisySkip !== undefined && (noisySkip.trim() === '' || !(rate >= 0 && rate <= 1)))
    throw new Error(`support-desk: noisySkip must be in [0, 1], got "${noisySkip}"`);
  return {
    ...supportDesk,
    options,
    tasks: ({ split, seed, count }) => generateTasks(split, seed, count, customers),
    env: deskEnv(PROMPTS[prompt as keyof typeof PROMPTS], customers),
    policies: {
      ...supportDesk.policies,
      'noisy-expert': ({ seed }) => noisyExpert(seed, rate, noisyKind as DeskNoisyKind),
    },
  };
});
