import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import pLimit from 'p-limit';
import { Piscina } from 'piscina';
import type { Json } from '../core/types.ts';
import { AgentR1Error, TaskDrawMismatchError } from '../core/errors.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { referencePolicySpec } from '../scenario/reference-policy.ts';
import { BatchQueue } from './batch-queue.ts';
import {
  UserPolicyPlacementError,
  type EpisodeBatch,
  type ExecutorReport,
  type Finished,
  type RolloutExecutor,
} from './executor.ts';
import { FinishedEpisode } from './finished-episode.ts';
import { isBatchPolicy } from './in-thread.ts';
import type { EpisodePlanItem } from './plan.ts';
import { taskChunks } from './task-chunks.ts';
import type { RolloutTask, RolloutTaskResult, WorkerMessage, WorkerPolicySpec } from './protocol.ts';
import { errorRecord } from './error-record.ts';
import { watchThread, WorkerStalledError } from './watchdog.ts';
import { workerEntryUrl } from './worker-entry.ts';
import { isScenarioPath } from '../scenario/load.ts';

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Tasks a worker runs at once, unless told otherwise. */
const TASKS_PER_WORKER = 4;

export interface WorkerThreadsOptions {
  /** Worker threads (default: the CPU count). */
  workers?: number;
  /** How workers load the scenario: a built-in name or a folder (default: the scenario's folder, else its id). */
  scenarioSource?: string;
  /** Most rows in one batch of a batch policy (default 32 when served, 64 in a copy). */
  maxBatch?: number;
  /** How long a served row waits for company (ms; default 'auto', see BatchQueueOptions). */
  maxWaitMs?: number | 'auto';
  /** Crashes an episode may be caught in before it is rerun alone (where a crash makes it an error record). */
  maxAttempts?: number;
  /**
   * Give each worker a copy of a checkpoint policy (loaded on the named tfjs backend) instead of
   * serving the policy from this thread: each thread then computes on its own core. A copy that
   * fails makes `play` reject (nothing is retried).
   */
  policyCopies?: { backend: string };
  /** Tasks a worker runs at once (default 4: episodes mostly wait, on tools or on the policy). */
  tasksPerWorker?: number;
  /**
   * How long a worker thread's event loop may stay blocked while it plays episodes before the thread
   * is terminated as stuck (scenario code that never yields: a loop in a tool). Default:
   * stallDeadlineMs(config), twice the tool timeout and 5 s, at least 15 s.
   */
  stallTimeoutMs?: number;
}

/**
 * How long a worker thread may go without its event loop turning before it is judged stuck: a tool
 * may compute synchronously for up to its timeout (which cannot be enforced while it holds the
 * thread), so twice that, and 5 s for everything else an episode does between two awaits; at least
 * 15 s, so that a slow machine's long generation is not taken for a hang.
 */
export function stallDeadlineMs(config: { toolTimeoutMs: number }): number {
  return Math.max(15_000, 2 * config.toolTimeoutMs + 5_000);
}

/** A policy whose weights can be written as a checkpoint, so a worker can load a copy. */
export interface CheckpointablePolicy extends Policy {
  readonly sampling: object;
  saveCheckpoint(dir: string): Promise<string>;
}

/** Whether a policy can be played by workers (a reference policy by name, or a tokenizing batch policy). */
export function canRunInWorkers(policy: Policy, scenario: Scenario): boolean {
  return isBatchPolicy(policy)
    ? policy.encodingSpec !== undefined
    : referencePolicySpec(policy, scenario) !== undefined;
}

/**
 * Plays episodes in Piscina worker threads, which run the episode machines; a batch policy stays
 * on this thread behind a batch queue (or, with `policyCopies`, each worker loads a copy). The pool
 * is made on first use and kept until `close`, so workers (and the worlds and indexes they built)
 * stay warm across rollouts. A worker that dies loses nothing: the episodes it had not finished are
 * played again from their seeds; one caught in `maxAttempts` crashes is played alone, and if it
 * crashes there, it is recorded as an error.
 */
export class WorkerThreads implements RolloutExecutor {
  private pool: { url: string; threads: Piscina } | undefined;
  private scratch: Promise<string> | undefined;
  private saved = { version: '', weights: '' };
  readonly workers: number;
  private readonly tasksPerWorker: number;

  constructor(private readonly options: WorkerThreadsOptions = {}) {
    this.workers = Math.max(1, options.workers ?? availableParallelism());
    this.tasksPerWorker = options.tasksPerWorker ?? TASKS_PER_WORKER;
  }

  async play(batch: EpisodeBatch, emit: (finished: Finished) => void, signal?: AbortSignal): Promise<ExecutorReport> {
    if (batch.userPolicy) throw new UserPolicyPlacementError();
    const spec = await this.policySpec(batch.policy, batch.scenario);
    const maxBatch = this.options.maxBatch ?? (spec.kind === 'copy' ? 64 : 32);
    const queue =
      spec.kind === 'served' && isBatchPolicy(batch.policy)
        ? new BatchQueue(batch.policy, { maxBatch, maxWaitMs: this.options.maxWaitMs ?? 'auto' })
        : undefined;
    const { items } = batch;
    const workers = this.workers;
    const concurrency = batch.concurrency ?? (spec.kind === 'served' ? Math.max(1, Math.ceil(maxBatch / workers)) : 8);
    // Chunks start in plan order, as many at once as the pool runs (Piscina does not keep a queued
    // task's place: a run of 100000 episodes in chunks of 256 saw its fourth chunk start 70th).
    const inFlight = pLimit(workers * this.tasksPerWorker);
    const maxAttempts = this.options.maxAttempts ?? 3;
    const stallMs = this.options.stallTimeoutMs ?? stallDeadlineMs(batch.config);
    const source = this.options.scenarioSource ?? batch.scenario.source ?? batch.scenario.id;
    const url = workerEntryUrl({ userScenario: isScenarioPath(source) });
    const pool = await this.poolFor(url);
    const done = new Set<number>();
    const attempts = new Map<number, number>();
    let toolMs = 0;
    let crashes = 0;
    // An emit that throws (a scenario summarizer that fails) ends the run with its error: no task
    // starts, the threads of those in flight are terminated, and play rejects.
    let failure: { error: unknown } | undefined;
    const terminators = new Set<() => void>();
    const accept = (finished: Finished) => {
      if (failure) return;
      done.add(finished.index);
      try {
        emit(finished);
      } catch (error) {
        failure = { error };
        for (const terminate of terminators) terminate();
      }
    };

    type TaskOutcome =
      | { crashed: false }
      | { crashed: true; error: unknown; stalled: false }
      /** `suspects`: the items whose episodes had started and not finished when the thread was stopped. */
      | { crashed: true; error: WorkerStalledError; stalled: true; suspects: EpisodePlanItem[] };

    const runTask = async (part: EpisodePlanItem[], on: Piscina): Promise<TaskOutcome> => {
      const { port1, port2 } = new MessageChannel();
      queue?.attach(port1);
      const closed = new Promise<void>((resolve) => port1.once('close', () => resolve()));
      // Not Piscina's abort, which would make the task run alone on its thread: the thread is found
      // by the id its heartbeat gives and terminated (every task on it fails, as in a crash).
      let thread: number | undefined;
      const terminate = () => void on.threads.find((w) => w.threadId === thread)?.terminate();
      const watch = watchThread(stallMs, terminate);
      terminators.add(terminate);
      port1.on('message', (m: WorkerMessage) => {
        watch.heard();
        if (m.type === 'alive') thread = m.thread;
        else if (m.type === 'records') {
          // The lines' bytes as the worker encoded them, passed on unparsed (see FinishedEpisode).
          let start = 0;
          for (let i = 0; i < m.digests.length; i++) {
            const end = m.ends[i]!;
            accept(FinishedEpisode.sealed(m.bytes.subarray(start, end), m.digests[i]!));
            start = end;
          }
        }
      });
      const started = new Int32Array(new SharedArrayBuffer(4 * part.length));
      const task: RolloutTask = {
        scenario: { source, options: batch.scenario.options },
        policy: spec,
        runId: batch.runId,
        config: batch.config,
        episodes: batch.draw
          ? {
              drawn: batch.draw,
              items: part.map(({ index, slot, sample, seed, task }) => ({
                index,
                slot,
                sample,
                seed,
                taskId: task.id,
              })),
            }
          : { items: part },
        concurrency,
        port: port2 as unknown as MessagePort,
        heartbeatMs: watch.heartbeatMs,
        started,
      };
      try {
        const result = (await on.run(task, { transferList: [port2 as never], signal })) as RolloutTaskResult;
        toolMs += result.toolMs;
        if (result.drawMismatch && batch.draw) {
          const { index, got } = result.drawMismatch;
          const expected = part.find((item) => item.index === index)!.task.id;
          failure ??= { error: new TaskDrawMismatchError(batch.scenario.id, batch.draw, index, expected, got) };
        }
        await closed;
        return { crashed: false };
      } catch (error) {
        if (!watch.stalled || signal?.aborted) return { crashed: true, error, stalled: false };
        const suspects = part.filter((item, k) => Atomics.load(started, k) === 1 && !done.has(item.index));
        return { crashed: true, error: new WorkerStalledError(stallMs), stalled: true, suspects };
      } finally {
        terminators.delete(terminate);
        watch.stop();
        port1.close();
      }
    };

    // A crash fails every task in flight on that worker, not only the culprit's. An episode that has
    // been in too many crashes is played alone, in a pool of its own (one task per thread): if it
    // crashes there, it is the culprit and is recorded as an error. A thread stuck in scenario code
    // that never yields is terminated by the watchdog; the episodes it had under way are played alone
    // at once (a hang repeats, and each costs a deadline), the ones it had not started again as usual.
    let quarantine: Piscina | undefined;
    const alone = pLimit(workers);
    const isolate = (item: EpisodePlanItem) =>
      alone(async () => {
        if (failure) return;
        quarantine ??= createPool(url, workers, 1);
        const outcome = await runTask([item], quarantine);
        if (!outcome.crashed || signal?.aborted || failure) return;
        crashes++;
        const why = outcome.stalled
          ? errorText(outcome.error)
          : `worker crashed on every attempt: ${errorText(outcome.error)}`;
        if (!done.has(item.index)) accept(errorRecord(batch, item, why));
      });

    const runChunk = async (part: EpisodePlanItem[]): Promise<void> => {
      const outcome = await inFlight(() => (failure ? { crashed: false as const } : runTask(part, pool)));
      if (!outcome.crashed || signal?.aborted || failure) return;
      // A copy that fails is not retried here: its caller plays the rest another way (see replica).
      if (spec.kind === 'copy') throw outcome.error;
      crashes++;
      const suspects = new Set(outcome.stalled ? outcome.suspects.map((i) => i.index) : []);
      const retry: EpisodePlanItem[] = [];
      const isolated: Promise<void>[] = [];
      for (const item of part.filter((i) => !done.has(i.index))) {
        const n = (attempts.get(item.index) ?? 1) + 1;
        attempts.set(item.index, n);
        if (n > maxAttempts || suspects.has(item.index)) isolated.push(isolate(item));
        else retry.push(item);
      }
      await Promise.all([retry.length > 0 ? runChunk(retry) : undefined, ...isolated]);
    };

    try {
      await Promise.all(taskChunks(items, workers, spec.kind === 'scripted' ? 'scripted' : 'model').map(runChunk));
    } finally {
      queue?.close();
      await quarantine?.destroy();
    }
    if (failure) throw failure.error;
    return { threads: workers, toolMs, crashes, ...(queue ? { batching: queue.stats() } : {}) };
  }

  async close(): Promise<void> {
    await this.pool?.threads.destroy();
    this.pool = undefined;
    if (this.scratch) await rm(await this.scratch, { recursive: true, force: true });
    this.scratch = undefined;
  }

  /** The pool of threads on this entry: the one kept from earlier rollouts, or a new one. */
  private async poolFor(url: string): Promise<Piscina> {
    if (this.pool?.url !== url) {
      await this.pool?.threads.destroy();
      this.pool = { url, threads: createPool(url, this.workers, this.tasksPerWorker) };
    }
    return this.pool.threads;
  }

  /** How a worker can rebuild the policy: by reference-policy name, served from here, or as a copy. */
  private async policySpec(policy: Policy, scenario: Scenario): Promise<WorkerPolicySpec> {
    if (isBatchPolicy(policy)) {
      const copies = this.options.policyCopies;
      if (copies) {
        if (!isCheckpointable(policy)) {
          throw new AgentR1Error(`policy ${policy.id} cannot be copied to workers: it cannot save a checkpoint`);
        }
        const checkpoint = await this.saveCopy(policy);
        const sampling = policy.sampling as Json;
        const maxBatch = this.options.maxBatch ?? 64;
        return {
          kind: 'copy',
          id: policy.id,
          version: policy.version,
          checkpoint,
          weights: this.saved.weights,
          backend: copies.backend,
          sampling,
          maxBatch,
        };
      }
      if (policy.encodingSpec)
        return { kind: 'served', id: policy.id, version: policy.version, encoding: policy.encodingSpec };
    } else {
      const reference = referencePolicySpec(policy, scenario);
      if (reference) return { kind: 'scripted', ...reference };
    }
    throw new AgentR1Error(
      `policy ${policy.id} cannot run in workers: use a reference policy, a checkpoint policy, or workers 0`,
    );
  }

  /** The policy's weights as a checkpoint the workers load (written once per version). */
  private async saveCopy(policy: CheckpointablePolicy): Promise<string> {
    this.scratch ??= mkdtemp(join(tmpdir(), 'agent-r1-copy-'));
    const dir = join(await this.scratch, 'policy');
    if (this.saved.version !== policy.version) {
      this.saved = { version: policy.version, weights: await policy.saveCheckpoint(dir) };
    }
    return dir;
  }
}

export function workerThreads(options: WorkerThreadsOptions = {}): WorkerThreads {
  return new WorkerThreads(options);
}

function createPool(url: string, workers: number, tasksPerWorker: number): Piscina {
  const pool = new Piscina({
    filename: url,
    execArgv: [],
    minThreads: workers,
    maxThreads: workers,
    // Workers must hear the batch queue between tasks (see DESIGN.md pitfalls).
    atomics: 'disabled',
    concurrentTasksPerWorker: tasksPerWorker,
    idleTimeout: 60_000,
  });
  // Piscina 5.3 can raise a pool-level error when a task is aborted early; the task's own rejection reports it.
  pool.on('error', () => {});
  return pool;
}

function isCheckpointable(policy: Policy): policy is CheckpointablePolicy {
  return typeof (policy as Partial<CheckpointablePolicy>).saveCheckpoint === 'function';
}
