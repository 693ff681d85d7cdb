import {
  UserPolicyPlacementError,
  type EpisodeBatch,
  type ExecutorReport,
  type Finished,
  type RolloutExecutor,
} from './executor.ts';
import { inThread } from './in-thread.ts';
import { WorkerThreads } from './worker-threads.ts';

export interface ReplicaOptions {
  /** The tfjs backend the replica loads its copy on (the one this thread uses). */
  backend: string;
  /** How the worker loads the scenario: a built-in name or a folder (default: the scenario's id). */
  scenarioSource?: string;
  /** Hears why the replica failed; its episodes were then played in this thread. */
  onFallback?: (error: Error) => void;
}

/**
 * Whether a replica can run on this backend. tfjs wasm computes on one core per thread in Node, so
 * a replica in a worker thread puts the second core to work; the tfjs-node bindings cannot load
 * in a worker thread (and there the backend's own threads use the cores).
 */
export function canUseReplica(backend: string): boolean {
  return backend === 'wasm' || backend === 'cpu';
}

/**
 * Two threads for a checkpoint policy: a copy of the model in a worker thread plays the second half
 * of each batch while this thread plays the first. If the copy fails, its unfinished episodes are
 * played here (same records: they depend only on their seeds) and `onFallback` hears why.
 */
export class Replica implements RolloutExecutor {
  private readonly here = inThread();
  private readonly there: WorkerThreads;
  /** Batches whose second half fell back to this thread. */
  failures = 0;

  constructor(private readonly options: ReplicaOptions) {
    this.there = new WorkerThreads({
      workers: 1,
      tasksPerWorker: 1,
      scenarioSource: options.scenarioSource,
      policyCopies: { backend: options.backend },
    });
  }

  async play(batch: EpisodeBatch, emit: (finished: Finished) => void, signal?: AbortSignal): Promise<ExecutorReport> {
    if (batch.userPolicy) throw new UserPolicyPlacementError();
    const split = Math.ceil(batch.items.length / 2);
    const theirs = batch.items.slice(split);
    const done = new Set<number>();
    // An emit that threw failed the copy's play: that is the run's error, not the copy's.
    let emitFailure: { error: unknown } | undefined;
    const remote = this.there.play(
      { ...batch, items: theirs },
      (finished) => {
        done.add(finished.index);
        try {
          emit(finished);
        } catch (error) {
          emitFailure = { error };
          throw error;
        }
      },
      signal,
    );
    remote.catch(() => {});
    const local = await this.here.play({ ...batch, items: batch.items.slice(0, split) }, emit, signal);
    try {
      const report = await remote;
      return { threads: 2, toolMs: local.toolMs + report.toolMs, crashes: report.crashes, batching: local.batching };
    } catch (err) {
      if (emitFailure) throw emitFailure.error;
      if (signal?.aborted) return { ...local, threads: 2 };
      this.failures++;
      this.options.onFallback?.(err instanceof Error ? err : new Error(String(err)));
      const rest = theirs.filter((item) => !done.has(item.index));
      const fallback = await this.here.play({ ...batch, items: rest }, emit, signal);
      return { threads: 2, toolMs: local.toolMs + fallback.toolMs, crashes: 0, batching: local.batching };
    }
  }

  async close(): Promise<void> {
    await this.there.close();
  }
}
