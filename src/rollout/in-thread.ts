import type { BatchPolicy, Policy } from '../policy/policy.ts';
import { toolCacheOf } from '../tools/runner.ts';
import { BatchQueue } from './batch-queue.ts';
import type { EpisodeBatch, ExecutorReport, Finished, RolloutExecutor } from './executor.ts';
import { playEpisodes } from './play-episodes.ts';

export interface InThreadOptions {
  /** Most rows in one `actBatch` call of a batch policy (default 64). */
  maxBatch?: number;
}

export function isBatchPolicy(policy: Policy): policy is BatchPolicy {
  return typeof (policy as Partial<BatchPolicy>).actBatch === 'function';
}

/**
 * Plays episodes in this thread, several at once (8 by default). A batch policy is called through
 * a batch queue, so the episodes in flight generate together instead of one row at a time.
 */
export function inThread(options: InThreadOptions = {}): RolloutExecutor {
  return {
    async play(batch: EpisodeBatch, emit: (finished: Finished) => void, signal?: AbortSignal): Promise<ExecutorReport> {
      const queue = isBatchPolicy(batch.policy)
        ? new BatchQueue(batch.policy, { maxBatch: options.maxBatch ?? 64, maxWaitMs: 0 })
        : undefined;
      // A model playing the user generates for all the episodes in flight together too.
      const userQueue =
        batch.userPolicy && isBatchPolicy(batch.userPolicy)
          ? new BatchQueue(batch.userPolicy, { maxBatch: options.maxBatch ?? 64, maxWaitMs: 0 })
          : undefined;
      const metrics = { toolMs: 0 };
      try {
        const context = {
          ...batch,
          policy: queue?.direct() ?? batch.policy,
          userPolicy: userQueue?.direct() ?? batch.userPolicy,
          toolCache: toolCacheOf(batch.scenario),
          metrics,
          signal,
        };
        await playEpisodes(batch.items, batch.concurrency ?? 8, context, emit);
      } finally {
        queue?.close();
        userQueue?.close();
      }
      return { threads: 1, toolMs: metrics.toolMs, crashes: 0, ...(queue ? { batching: queue.stats() } : {}) };
    },
    async close() {},
  };
}
