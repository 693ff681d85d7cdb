import { AgentR1Error } from '../core/errors.ts';
import type { EpisodeConfig } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { BatchQueueStats } from './batch-queue.ts';
import type { Finished } from './finished-episode.ts';
import type { EpisodePlanItem, TaskDraw } from './plan.ts';

export type { Finished };

/** A user policy named by the run is an object of this thread: other threads and machines cannot be sent it. */
export class UserPolicyPlacementError extends AgentR1Error {
  constructor() {
    super('a run that names its user policy plays in this thread: no worker threads, replica or queue');
  }
}

/** Planned episodes of one run, ready to be played. */
export interface EpisodeBatch {
  scenario: Scenario;
  policy: Policy;
  /** Who plays the scenario's user, when the run names one (played in this thread). */
  userPolicy?: Policy;
  runId: string;
  config: EpisodeConfig;
  items: readonly EpisodePlanItem[];
  /**
   * Where the items' tasks came from scenario.tasks: the call that drew them. An executor in another
   * thread may draw them there instead of being sent them (each item's `slot` says which).
   */
  draw?: TaskDraw;
  /** Episodes in flight at once in each thread (each executor has its default). */
  concurrency?: number;
}

export interface ExecutorReport {
  /** Threads that played episodes. */
  threads: number;
  /** Time spent inside tools, summed over threads (ms). */
  toolMs: number;
  /** Worker crashes survived (their episodes were played again). */
  crashes: number;
  /** The batch queue's counters, where a batch policy was served through one. */
  batching?: BatchQueueStats;
}

/**
 * Where episodes are played: in this thread, in worker threads, on a replica of the model. An
 * executor plays every item of a batch and hands each finished record to `emit`, in any order and
 * possibly more than once (a rerun after a crash); `rollout` orders them, drops repeats, and owns
 * the run's plan and summary. After `signal` aborts, an executor starts no new episode and returns.
 * Records depend only on the plan, never on the executor: that is what makes them replayable.
 * `emit` may throw (a scenario summarizer that fails): the executor then stops and `play` rejects
 * with that error.
 */
export interface RolloutExecutor {
  play(batch: EpisodeBatch, emit: (finished: Finished) => void, signal?: AbortSignal): Promise<ExecutorReport>;
  /** Frees threads and pools; the executor cannot be used afterwards. */
  close(): Promise<void>;
}
