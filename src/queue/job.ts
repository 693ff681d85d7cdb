import { createHash } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson } from '../core/canonical-json.ts';
import { MalformedJobError } from './errors.ts';
import {
  ACTION_FORMATS,
  EPISODE_LIMITS,
  type EpisodeBudget,
  type EpisodeConfig,
  type Json,
  type Task,
} from '../core/types.ts';
import { contextSetting } from '../env/context.ts';
import type { EpisodePlanItem } from '../rollout/plan.ts';

/**
 * How a queue worker gets the policy: a reference policy of the scenario by name, or a checkpoint
 * by the content hash of its weights (fetched from the queue's store, see checkpoint-store.ts).
 */
export type QueuePolicySpec =
  | { kind: 'scripted'; name: string; seed: number; id: string; version: string }
  | { kind: 'checkpoint'; id: string; version: string; weights: string; sampling: Json };

/** How a job that failed for want of a worker able to play it says so: the run stops, no episode is blamed. */
export const SETUP_FAILED = 'worker cannot set up:';

/** One job: a chunk of a run's planned episodes and everything a worker needs to play them. */
export interface RolloutJobData {
  /** The run's key: a hash of everything that determines its records (see runKeyOf). */
  run: string;
  /** Which chunk of the plan (jobs made later for lost or failed episodes carry their chunk's number). */
  chunk: number;
  /** `source` is how a worker loads it (a built-in name or a folder); id and version must match. */
  scenario: { source: string; id: string; version: string; options: { [key: string]: string } };
  policy: QueuePolicySpec;
  runId: string;
  config: EpisodeConfig;
  items: EpisodePlanItem[];
  /** Episodes in flight at once per thread (absent: the worker's executor decides). */
  concurrency?: number;
}

const item = z.object({
  index: z.number().int().nonnegative(),
  task: z.looseObject({ id: z.string() }),
  slot: z.number().int().nonnegative(),
  sample: z.number().int().nonnegative(),
  seed: z.number().int(),
});

const budget = (name: EpisodeBudget) => z.number().int().min(EPISODE_LIMITS[name].min).max(EPISODE_LIMITS[name].max);

/** A context setting as the CLI's --context takes it (whether the scenario has a card is the episode's to say). */
const contextSchema = z
  .string()
  .max(100)
  .superRefine((value, ctx) => {
    try {
      contextSetting({ id: '', env: { card: () => '' } }, value);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  });

/** A job's episode budgets: every one, within the bounds the CLI accepts (nothing else). */
const episodeConfigSchema = z.strictObject({
  actionFormat: z.enum(ACTION_FORMATS).optional(),
  maxTurns: budget('maxTurns'),
  maxTokensPerTurn: budget('maxTokensPerTurn'),
  maxTotalTokens: budget('maxTotalTokens'),
  toolTimeoutMs: budget('toolTimeoutMs'),
  maxToolOutputChars: budget('maxToolOutputChars'),
  context: contextSchema.optional(),
});

/** Episodes in flight at once per thread that a job may ask for. */
export const MAX_JOB_CONCURRENCY = 1024;

/** What a worker checks a job against before playing it (jobs come from whoever can write to Redis). */
export const rolloutJobSchema = z.object({
  run: z.string().regex(/^[0-9a-f]{16,64}$/),
  chunk: z.number().int().nonnegative(),
  scenario: z.object({
    source: z.string().min(1),
    id: z.string(),
    version: z.string(),
    options: z.record(z.string(), z.string()),
  }),
  policy: z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('scripted'),
      name: z.string(),
      seed: z.number().int(),
      id: z.string(),
      version: z.string(),
    }),
    z.object({
      kind: z.literal('checkpoint'),
      id: z.string(),
      version: z.string(),
      weights: z.string().regex(/^[0-9a-f]{16,128}$/),
      sampling: z.unknown(),
    }),
  ]),
  runId: z.string(),
  config: episodeConfigSchema,
  items: z.array(item).min(1),
  concurrency: z.number().int().positive().max(MAX_JOB_CONCURRENCY).optional(),
});

export function parseRolloutJob(data: unknown): RolloutJobData {
  const result = rolloutJobSchema.safeParse(data);
  if (!result.success)
    throw new MalformedJobError(result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  const parsed = result.data;
  return {
    ...parsed,
    policy: parsed.policy as QueuePolicySpec,
    items: parsed.items.map((i) => ({ ...i, task: i.task as unknown as Task })),
  };
}

/**
 * The key of a run on the queue: a hash of what determines its records (run id, scenario, policy
 * and its version, episode config, the plan itself). Equal runs have equal keys, which is how a
 * restarted coordinator (--resume) finds what the first one committed; a trainer's steps differ
 * by their plan and policy version.
 */
export function runKeyOf(parts: {
  runId: string;
  scenario: RolloutJobData['scenario'];
  policy: QueuePolicySpec;
  config: EpisodeConfig;
  items: readonly EpisodePlanItem[];
}): string {
  const key = canonicalJson({
    runId: parts.runId,
    scenario: parts.scenario,
    policy: parts.policy,
    config: parts.config as unknown as Json,
    items: parts.items as unknown as Json,
  });
  return createHash('sha256').update(key).digest('hex').slice(0, 24);
}

/** Job ids: `{run}-{chunk}` for a chunk's first job; later jobs for the same episodes add a suffix. */
export function chunkJobId(run: string, chunk: number): string {
  return `${run}-${chunk}`;
}
