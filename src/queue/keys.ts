/**
 * Where the queue keeps things in Redis. BullMQ's own keys live under `{prefix}:{QUEUE_NAME}:`; a
 * run's results, the set of its finished episodes and the ids of its jobs under `{prefix}:run:{run}:`;
 * checkpoints under `{prefix}:ckpt:{hash}`.
 */
export const DEFAULT_PREFIX = 'agent-r1';
export const QUEUE_NAME = 'rollouts';

/** How long a run's results are kept without a coordinator (for --resume), and checkpoints without a run. */
export const RUN_TTL_S = 7 * 24 * 3600;

export interface RunKeys {
  /** Stream of results: records, each job's end (see result-log.ts). */
  results: string;
  /** Set of the episode indices that have a result (workers skip them on a retry). */
  done: string;
  /** Set of the run's job ids (for --resume and the clean-up). */
  jobs: string;
}

export function runKeys(prefix: string, run: string): RunKeys {
  const base = `${prefix}:run:${run}`;
  return { results: `${base}:results`, done: `${base}:done`, jobs: `${base}:jobs` };
}

export function checkpointKeys(prefix: string, weights: string): { files: string; runs: string } {
  return { files: `${prefix}:ckpt:${weights}`, runs: `${prefix}:ckpt:${weights}:runs` };
}
