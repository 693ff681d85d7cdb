import { homedir, hostname, availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Job, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentR1Error } from '../core/errors.ts';
import type { Policy } from '../policy/policy.ts';
import { type Finished, lineOf } from '../rollout/finished-episode.ts';
import { WorkerThreads } from '../rollout/worker-threads.ts';
import type { RecordedScenario } from '../scenario/load.ts';
import { isScenarioPath } from '../scenario/load.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { referencePolicy } from '../scenario/reference-policy.ts';
import { CheckpointCache, CheckpointStore } from './checkpoint-store.ts';
import { connectRedis, parseRedisUrl, reasonOf } from './connection.ts';
import { parseRolloutJob, type RolloutJobData, SETUP_FAILED } from './job.ts';
import { DEFAULT_PREFIX, QUEUE_NAME, runKeys } from './keys.ts';
import { type QueueLibraries, queueLibraries } from './libraries.ts';
import { appendEnd, appendRecord } from './result-log.ts';
import { StoredCheckpointPolicy } from './stored-policy.ts';

export interface QueueWorkerOptions {
  /** redis://HOST:PORT of the queue. */
  url: string;
  /** How this worker is named in jobs, results and the coordinator's counts (default: host-pid). */
  name?: string;
  /** Jobs played at once (default 2: the next job starts while the last episodes of one finish). */
  concurrency?: number;
  /** Worker threads that play episodes (default: the CPU count). */
  threads?: number;
  /** The tfjs backend checkpoint copies load on in the threads (default 'wasm'). */
  backend?: string;
  /** Where fetched checkpoints are kept (default ~/.cache/agent-r1/checkpoints). */
  cacheDir?: string;
  /**
   * How long a job's lock lasts (ms; default 30 000). The lock is renewed every half of it while the
   * job plays, so it bounds how long this process's event loop may stall, not an episode's length;
   * after a crash, the job is taken over within about lockDuration + stalledInterval.
   */
  lockDurationMs?: number;
  /** How often this worker looks for stalled jobs of dead workers (ms; default 30 000). */
  stalledIntervalMs?: number;
  /** Times a job may stall (its worker die) before it fails (default 2). */
  maxStalledCount?: number;
  /** Renew job locks (default true; false only to test what happens when a lock is lost). */
  renewLocks?: boolean;
  /** Key prefix in Redis (default 'agent-r1'). */
  prefix?: string;
  /**
   * The scenario a job names, from what this worker trusts: the built-in scenarios and the folders
   * named on its own command line (loadRecordScenario). A job is data from whoever can write to
   * Redis; it never decides which folder's code runs here.
   */
  loadScenario: (wanted: RecordedScenario) => Promise<Scenario>;
  /** Hears every change of the worker's status. */
  onStatus?: (status: WorkerStatus) => void;
}

export interface WorkerStatus {
  name: string;
  state: 'waiting' | 'playing' | 'draining' | 'stopped';
  /** Jobs in play: episodes written so far of those it plays. */
  jobs: { id: string; run: string; done: number; total: number }[];
  /** Episodes played since start. */
  episodes: number;
  jobsDone: number;
  jobsFailed: number;
  /** The last error (a lost connection, a failed job), if any. */
  lastError?: string;
}

interface ExecutorEntry {
  executor: WorkerThreads;
  /** The checkpoint the threads' copies hold; jobs of another checkpoint wait until none is in play. */
  weights?: string;
  copies: number;
  waiters: (() => void)[];
}

const defaultCacheDir = () => join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'agent-r1', 'checkpoints');

/**
 * `agent-r1 worker`: takes rollout jobs from the queue and plays them with the one local engine, a
 * workerThreads executor (scenario and episode machines in its threads; a checkpoint policy as a
 * copy in each thread, fetched once by its content hash and cached on disk). This thread only moves
 * jobs and results, so it stays free to renew job locks however busy the threads are. Records are
 * written to the run's result log as each episode ends; on a retry, episodes already there are
 * skipped.
 */
export class QueueWorker {
  private readonly name: string;
  private readonly worker: Worker;
  private readonly executors = new Map<string, ExecutorEntry>();
  private readonly scenarios = new Map<string, Promise<Scenario>>();
  private readonly cache: CheckpointCache;
  private readonly playing = new Map<string, { run: string; done: number; total: number }>();
  private state: WorkerStatus['state'] = 'waiting';
  private episodes = 0;
  private jobsDone = 0;
  private jobsFailed = 0;
  private lastError: string | undefined;
  private returning = false;
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly options: QueueWorkerOptions,
    private readonly redis: Redis,
    private readonly bullmq: QueueLibraries['bullmq'],
  ) {
    this.name = options.name ?? `${hostname()}-${process.pid}`;
    const prefix = options.prefix ?? DEFAULT_PREFIX;
    this.cache = new CheckpointCache(new CheckpointStore(redis, prefix), options.cacheDir ?? defaultCacheDir());
    this.worker = new bullmq.Worker(QUEUE_NAME, (job, token, signal) => this.process(job, token, signal), {
      connection: { ...parseRedisUrl(options.url), retryStrategy: (n: number) => Math.min(n * 100, 1000) },
      prefix,
      name: this.name,
      concurrency: Math.max(1, options.concurrency ?? 2),
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: options.stalledIntervalMs ?? 30_000,
      maxStalledCount: options.maxStalledCount ?? 2,
      skipLockRenewal: options.renewLocks === false,
      // Short polls, so that a graceful stop does not wait out a long one.
      drainDelay: 1,
    });
    this.worker.on('error', (err) => this.note(reasonOf(err)));
    this.worker.on('failed', (_job, err) => {
      if (err?.name === 'WaitingError') return;
      this.jobsFailed++;
      this.note(reasonOf(err));
    });
    // Another worker has the job now: stop playing it (whatever was written stays, as duplicates).
    this.worker.on('lockRenewalFailed', (ids: string[]) => {
      for (const id of ids) this.worker.cancelJob(id, 'lost its lock');
    });
  }

  /** Connects and starts taking jobs; a QueueUnavailableError if Redis cannot be reached. */
  static async start(options: QueueWorkerOptions): Promise<QueueWorker> {
    const redis = await connectRedis(options.url);
    const worker = new QueueWorker(options, redis, (await queueLibraries()).bullmq);
    await worker.worker.waitUntilReady();
    worker.emitStatus();
    return worker;
  }

  status(): WorkerStatus {
    return {
      name: this.name,
      state: this.state,
      jobs: [...this.playing.entries()].map(([id, j]) => ({ id, ...j })),
      episodes: this.episodes,
      jobsDone: this.jobsDone,
      jobsFailed: this.jobsFailed,
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }

  /**
   * Stops taking jobs and lets the jobs in play finish for up to `graceMs`; then returns the rest to
   * the queue (another worker takes them at once; what was written stays). Resolves when stopped.
   */
  stop(graceMs = 30_000): Promise<void> {
    this.stopping ??= (async () => {
      this.state = 'draining';
      this.emitStatus();
      const timer = setTimeout(() => this.returnJobs(), graceMs);
      try {
        await this.worker.close();
      } finally {
        clearTimeout(timer);
      }
      for (const entry of this.executors.values()) await entry.executor.close();
      this.executors.clear();
      this.redis.disconnect();
      this.state = 'stopped';
      this.emitStatus();
    })();
    return this.stopping;
  }

  /** Returns the jobs in play to the queue now (a second signal during a graceful stop). */
  returnJobs(): void {
    this.returning = true;
    this.worker.cancelAllJobs('returned to the queue');
  }

  private note(error: string): void {
    this.lastError = error;
    this.emitStatus();
  }

  private emitStatus(): void {
    if (this.state !== 'draining' && this.state !== 'stopped') {
      this.state = this.playing.size > 0 ? 'playing' : 'waiting';
    }
    this.options.onStatus?.(this.status());
  }

  private async process(job: Job, token: string | undefined, signal?: AbortSignal): Promise<{ played: number }> {
    let data: RolloutJobData;
    try {
      data = parseRolloutJob(job.data);
    } catch (err) {
      throw new this.bullmq.UnrecoverableError(`${SETUP_FAILED} a malformed job (${reasonOf(err)})`);
    }
    const jobId = job.id ?? `${data.run}-${data.chunk}`;
    const progress = { run: data.run, done: 0, total: data.items.length };
    this.playing.set(jobId, progress);
    this.emitStatus();
    try {
      return await this.play(job, jobId, data, progress, token, signal);
    } finally {
      this.playing.delete(jobId);
      this.emitStatus();
    }
  }

  private async play(
    job: Job,
    jobId: string,
    data: RolloutJobData,
    progress: { done: number; total: number },
    token: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ played: number }> {
    let setup: { scenario: Scenario; policy: Policy; entry: ExecutorEntry; weights?: string };
    try {
      setup = await this.setup(data);
    } catch (err) {
      throw new Error(`${SETUP_FAILED} ${reasonOf(err)}`);
    }
    const keys = runKeys(this.options.prefix ?? DEFAULT_PREFIX, data.run);
    // Episodes already in the run's results (an earlier attempt, another worker) are not played again.
    const done = await this.redis.smismember(keys.done, ...data.items.map((i) => i.index));
    const items = data.items.filter((_, k) => done[k] !== 1);
    progress.total = items.length;

    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let closed = false;
    const writes: Promise<unknown>[] = [];
    const emit = (finished: Finished) => {
      const line = lineOf(finished);
      writes.push(
        appendRecord(this.redis, keys, { index: finished.index, worker: this.name, job: jobId, line }).then((open) => {
          if (!open) {
            closed = true;
            stop.abort();
          }
        }),
      );
      progress.done++;
      this.episodes++;
      this.emitStatus();
    };
    let toolMs = 0;
    let threads = 0;
    const release = await this.acquire(setup.entry, setup.weights);
    try {
      if (items.length > 0 && !stop.signal.aborted) {
        const report = await setup.entry.executor.play(
          {
            scenario: setup.scenario,
            policy: setup.policy,
            runId: data.runId,
            config: data.config,
            items,
            ...(data.concurrency ? { concurrency: data.concurrency } : {}),
          },
          emit,
          stop.signal,
        );
        toolMs = report.toolMs;
        threads = report.threads;
      }
      await Promise.all(writes);
      if (closed) throw new AgentR1Error(`run ${data.run} is closed (finished or started over)`);
      if (signal?.aborted) {
        if (this.returning && token) {
          await job.moveToWait(token);
          throw new this.bullmq.WaitingError();
        }
        throw new AgentR1Error(`job ${jobId} ${String(signal.reason ?? 'was cancelled')}`);
      }
      await appendEnd(this.redis, keys, { job: jobId, worker: this.name, played: items.length, toolMs, threads });
      this.jobsDone++;
      return { played: items.length };
    } finally {
      release();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The scenario, a policy handle and the executor for a job; any failure here is the worker's, not an episode's. */
  private async setup(
    data: RolloutJobData,
  ): Promise<{ scenario: Scenario; policy: Policy; entry: ExecutorEntry; weights?: string }> {
    const scenario = await this.scenario(data.scenario);
    if (scenario.id !== data.scenario.id || scenario.version !== data.scenario.version) {
      throw new AgentR1Error(
        `scenario ${data.scenario.source} is ${scenario.id} ${scenario.version} here; the run has ${data.scenario.id} ${data.scenario.version}`,
      );
    }
    // The threads load what this worker trusts (the folder it was given), not the job's path.
    const entry = this.executorFor(scenario.source ?? scenario.id);
    const spec = data.policy;
    if (spec.kind === 'scripted') {
      if (!Object.hasOwn(scenario.policies, spec.name)) {
        throw new AgentR1Error(`scenario ${scenario.id} has no policy "${spec.name}" here`);
      }
      // Made as the coordinator made it (name and seed), so the threads make the same one.
      const policy = await referencePolicy(scenario, spec.name, spec.seed);
      return { scenario, policy, entry };
    }
    const dir = await this.cache.get(spec.weights);
    const policy = new StoredCheckpointPolicy(spec.id, spec.version, spec.sampling as object, dir, spec.weights);
    return { scenario, policy, entry, weights: spec.weights };
  }

  private scenario(job: RolloutJobData['scenario']): Promise<Scenario> {
    const { id, source, options } = job;
    const key = JSON.stringify([id, source, Object.entries(options).sort()]);
    let s = this.scenarios.get(key);
    if (!s) {
      // A job names a built-in scenario by its id, a scenario of one's own by the coordinator's folder.
      s = isScenarioPath(source)
        ? this.options.loadScenario({ id, options, source })
        : source === id
          ? this.options.loadScenario({ id, options })
          : Promise.reject(new AgentR1Error(`the job's scenario source "${source}" is neither a folder nor ${id}`));
      s.catch(() => this.scenarios.delete(key));
      this.scenarios.set(key, s);
    }
    return s;
  }

  /** One thread pool per scenario source, kept warm across jobs and runs. */
  private executorFor(source: string): ExecutorEntry {
    let entry = this.executors.get(source);
    if (!entry) {
      entry = {
        executor: new WorkerThreads({
          workers: this.options.threads ?? availableParallelism(),
          scenarioSource: source,
          policyCopies: { backend: this.options.backend ?? 'wasm' },
        }),
        copies: 0,
        waiters: [],
      };
      this.executors.set(source, entry);
    }
    return entry;
  }

  /** Waits until the threads can hold this checkpoint (no job of another one in play); returns the release. */
  private async acquire(entry: ExecutorEntry, weights: string | undefined): Promise<() => void> {
    if (weights === undefined) return () => {};
    while (entry.copies > 0 && entry.weights !== weights) {
      await new Promise<void>((resolve) => entry.waiters.push(resolve));
    }
    entry.copies++;
    entry.weights = weights;
    return () => {
      entry.copies--;
      if (entry.copies === 0) for (const wake of entry.waiters.splice(0)) wake();
    };
  }
}
