import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { EpisodeRecord, Json } from '../core/types.ts';
import { AgentR1Error, CorruptRecordError } from '../core/errors.ts';
import type { Policy } from '../policy/policy.ts';
import { recordChecksum, serializeRecord } from '../record/record.ts';
import {
  UserPolicyPlacementError,
  type EpisodeBatch,
  type ExecutorReport,
  type RolloutExecutor,
} from '../rollout/executor.ts';
import { isBatchPolicy } from '../rollout/in-thread.ts';
import type { EpisodePlanItem } from '../rollout/plan.ts';
import type { CheckpointablePolicy } from '../rollout/worker-threads.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { referencePolicySpec } from '../scenario/reference-policy.ts';
import { CheckpointStore } from './checkpoint-store.ts';
import { connectRedis, isConnectionError, reasonOf, redactUrl } from './connection.ts';
import { QueueRunError, QueueUnavailableError } from './errors.ts';
import { queueLibraries } from './libraries.ts';
import { errorRecord } from '../rollout/error-record.ts';
import { chunkJobId, type QueuePolicySpec, type RolloutJobData, runKeyOf, SETUP_FAILED } from './job.ts';
import { DEFAULT_PREFIX, QUEUE_NAME, RUN_TTL_S, type RunKeys, runKeys } from './keys.ts';
import { openResults, type ResultEntry, readResults } from './result-log.ts';

/** The coordinator's connections, and BullMQ's Job class (BullMQ is loaded on connecting). */
interface QueueClient {
  redis: Redis;
  reader: Redis;
  queue: Queue;
  Job: typeof Job;
  store: CheckpointStore;
}

export interface QueueExecutorOptions {
  /** redis://HOST:PORT of the queue. */
  url: string;
  /**
   * How jobs name the scenario: a built-in name, or a folder (default: the folder the scenario was
   * loaded from, else its id). A worker plays a folder's scenario only when it was started with that
   * folder (`agent-r1 worker --scenario DIR`), found by this path or by the scenario's id.
   */
  scenarioSource?: string;
  /** Episodes per job (default 16): fewer, larger jobs cost less; smaller ones balance better. */
  chunkSize?: number;
  /** Times a job is tried before its episodes are tried one by one, then recorded as errors (default 3). */
  attempts?: number;
  /** Keep what an earlier coordinator of the same run committed, instead of starting the run over. */
  resume?: boolean;
  /** How long Redis may be unreachable during a run before the run stops (ms; default 60 000). */
  waitForRedisMs?: number;
  /** How often jobs are checked for loss or failure (ms; default 2000). */
  checkEveryMs?: number;
  /** Key prefix in Redis (default 'agent-r1'). */
  prefix?: string;
  /** Hears each determinism fault as it is found. */
  onFault?: (fault: DeterminismFault) => void;
  /** Hears what happens on the queue (for a status line). */
  onEvent?: (event: QueueEvent) => void;
}

/** Two workers played the same episode and produced different records. */
export interface DeterminismFault {
  run: string;
  index: number;
  episodeId: string;
  /** The worker whose record was kept. */
  committedBy: string;
  /** The worker whose different record was dropped. */
  duplicateBy: string;
}

export type QueueEvent =
  | { type: 'enqueued'; run: string; jobs: number; episodes: number; resumed: number }
  | { type: 'requeued'; job: string; episodes: number; reason: string }
  | { type: 'isolated'; job: string; episodes: number; reason: string }
  | { type: 'gave-up'; index: number; reason: string }
  | { type: 'corrupt'; worker: string; reason: string }
  | { type: 'workers'; count: number }
  | { type: 'redis-down'; reason: string }
  | { type: 'redis-back' };

export interface QueueStats {
  /** Episodes committed per worker name, over this executor's runs. */
  workers: { [name: string]: number };
  /** Results that arrived for an episode already committed (dropped). */
  duplicates: number;
  /** Duplicates that differed from the committed record. */
  faults: DeterminismFault[];
  /** Jobs made again for episodes whose job was lost or failed. */
  requeued: number;
  /** Episodes found committed by an earlier coordinator (--resume). */
  resumed: number;
  /** Episodes recorded as errors after every attempt failed. */
  gaveUp: number;
}

type QueueSettings = Required<Omit<QueueExecutorOptions, 'onFault' | 'onEvent' | 'scenarioSource' | 'prefix'>> &
  Pick<QueueExecutorOptions, 'onFault' | 'onEvent'>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const hashOf = (line: string) => createHash('sha256').update(line).digest('hex');

/**
 * A record line from a worker: parsed and its checksum verified (the schema is the worker's own code's;
 * checking it here would cost most of the coordinator's time per episode).
 */
function parseSealedLine(line: string): EpisodeRecord {
  let record: EpisodeRecord;
  try {
    record = JSON.parse(line) as EpisodeRecord;
  } catch (err) {
    throw new CorruptRecordError(`not valid JSON (${reasonOf(err)})`);
  }
  if (typeof record !== 'object' || record === null || record.checksum !== recordChecksum(record)) {
    throw new CorruptRecordError('checksum mismatch');
  }
  return record;
}

/** Whether a policy can be played by queue workers: a reference policy, or a checkpoint policy they can load. */
export function canRunOnQueue(policy: Policy, scenario: Scenario): boolean {
  return isBatchPolicy(policy) ? isCheckpointable(policy) : Object.hasOwn(scenario.policies, policy.id);
}

function isCheckpointable(policy: Policy): policy is CheckpointablePolicy {
  return typeof (policy as Partial<CheckpointablePolicy>).saveCheckpoint === 'function';
}

/**
 * Plays episodes on `agent-r1 worker` processes anywhere, through a BullMQ queue on Redis. The plan is
 * cut into chunks; each chunk is a job with a deterministic id (run key + chunk). Workers stream each
 * record to the run's result log as it finishes; this coordinator reads the log, keeps the first
 * record of each episode (a later one is a duplicate: compared, then dropped; a difference is a
 * determinism fault naming both workers), and hands records on (rollout() orders them). Jobs whose
 * worker died are taken over by BullMQ's stalled-job check; a job that ended or vanished with
 * episodes missing is made again; a job that failed every attempt has its episodes tried one by
 * one, and an episode that fails alone every time is recorded as an error. A finished run's jobs
 * and results are deleted; a stopped one's are kept (with an expiry) for `resume`.
 */
export class QueueExecutor implements RolloutExecutor {
  readonly stats: QueueStats = { workers: {}, duplicates: 0, faults: [], requeued: 0, resumed: 0, gaveUp: 0 };
  private client: QueueClient | undefined;
  private connecting: Promise<NonNullable<QueueExecutor['client']>> | undefined;
  private scratch: string | undefined;
  private saved = { version: '', weights: '', dir: '' };
  readonly prefix: string;
  /** @internal The options with their defaults. */
  readonly settings: QueueSettings;

  constructor(private readonly options: QueueExecutorOptions) {
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.settings = {
      url: options.url,
      chunkSize: Math.max(1, options.chunkSize ?? 16),
      attempts: Math.max(1, options.attempts ?? 3),
      resume: options.resume ?? false,
      waitForRedisMs: options.waitForRedisMs ?? 60_000,
      checkEveryMs: options.checkEveryMs ?? 2000,
      onFault: options.onFault,
      onEvent: options.onEvent,
    };
  }

  /** Connects to Redis (done by the first play otherwise): a QueueUnavailableError if it cannot. */
  async connect(): Promise<void> {
    await this.connection();
  }

  private connection(): Promise<NonNullable<QueueExecutor['client']>> {
    this.connecting ??= (async () => {
      const redis = await connectRedis(this.options.url, { failFast: true });
      // The blocking reads get their own connection (a blocked connection serves nothing else).
      const reader = redis.duplicate({ commandTimeout: 15_000 });
      reader.on('error', () => {});
      try {
        await reader.connect();
      } catch (err) {
        redis.disconnect();
        throw new QueueUnavailableError(redactUrl(this.options.url), reasonOf(err));
      }
      const { bullmq } = await queueLibraries();
      const queue = new bullmq.Queue(QUEUE_NAME, { connection: redis, prefix: this.prefix });
      queue.on('error', () => {});
      this.client = { redis, reader, queue, Job: bullmq.Job, store: new CheckpointStore(redis, this.prefix) };
      return this.client;
    })();
    this.connecting.catch(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  async play(
    batch: EpisodeBatch,
    emit: (record: EpisodeRecord) => void,
    signal?: AbortSignal,
  ): Promise<ExecutorReport> {
    if (batch.userPolicy) throw new UserPolicyPlacementError();
    const client = await this.connection();
    const policy = await this.policySpec(batch.policy, batch.scenario);
    const scenario = {
      source: this.options.scenarioSource ?? batch.scenario.source ?? batch.scenario.id,
      id: batch.scenario.id,
      version: batch.scenario.version,
      options: batch.scenario.options,
    };
    const run = runKeyOf({
      runId: batch.runId,
      scenario,
      policy: policy.spec,
      config: batch.config,
      items: batch.items,
    });
    const coordinated = new CoordinatedRun(this, client, batch, emit, {
      run,
      scenario,
      policy: policy.spec,
      checkpointDir: policy.dir,
    });
    return coordinated.play(signal);
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.connecting = undefined;
    if (client) {
      await client.queue.close().catch(() => {});
      client.reader.disconnect();
      client.redis.disconnect();
    }
    if (this.scratch) await rm(this.scratch, { recursive: true, force: true });
    this.scratch = undefined;
  }

  /** How workers get the policy; a checkpoint is saved once per version and put in the store. */
  private async policySpec(policy: Policy, scenario: Scenario): Promise<{ spec: QueuePolicySpec; dir?: string }> {
    if (!isBatchPolicy(policy)) {
      const reference = referencePolicySpec(policy, scenario);
      if (reference) return { spec: { kind: 'scripted', ...reference, id: policy.id, version: policy.version } };
    } else if (isCheckpointable(policy)) {
      if (this.saved.version !== policy.version || !this.saved.weights) {
        this.scratch ??= await mkdtemp(join(tmpdir(), 'agent-r1-queue-'));
        const dir = join(this.scratch, 'policy');
        this.saved = { version: policy.version, weights: await policy.saveCheckpoint(dir), dir };
      }
      const spec: QueuePolicySpec = {
        kind: 'checkpoint',
        id: policy.id,
        version: policy.version,
        weights: this.saved.weights,
        sampling: policy.sampling as Json,
      };
      return { spec, dir: this.saved.dir };
    }
    throw new AgentR1Error(
      `policy ${policy.id} cannot run on queue workers: use a reference policy of the scenario or a checkpoint (ckpt:DIR)`,
    );
  }
}

interface TrackedJob {
  chunk: number;
  items: EpisodePlanItem[];
}

/** One play on the queue: the run's jobs, the results read so far, and what is committed. */
class CoordinatedRun {
  private readonly keys: RunKeys;
  private readonly byIndex = new Map<number, EpisodePlanItem>();
  private readonly committed = new Map<number, { hash: string; worker: string; synthetic?: boolean }>();
  private readonly jobs = new Map<string, TrackedJob>();
  private readonly workersSeen = new Set<string>();
  private readonly settings: QueueSettings;
  private requeued = 0;
  private lastId = '0';
  private toolMs = 0;
  private lastCheck = 0;
  private downSince: number | undefined;
  private lastWorkerCount = -1;

  constructor(
    private readonly owner: QueueExecutor,
    private readonly client: QueueClient,
    private readonly batch: EpisodeBatch,
    private readonly emit: (record: EpisodeRecord) => void,
    private readonly job: {
      run: string;
      scenario: RolloutJobData['scenario'];
      policy: QueuePolicySpec;
      checkpointDir?: string;
    },
  ) {
    this.keys = runKeys(owner.prefix, job.run);
    this.settings = owner.settings;
    for (const item of batch.items) this.byIndex.set(item.index, item);
  }

  private get done(): boolean {
    return this.committed.size >= this.byIndex.size;
  }

  async play(signal?: AbortSignal): Promise<ExecutorReport> {
    const { redis, store } = this.client;
    if (this.byIndex.size === 0 || signal?.aborted) return { threads: 0, toolMs: 0, crashes: 0 };
    let finished = false;
    try {
      await this.retrying(async () => {
        if (!this.settings.resume) await this.discard();
        await openResults(redis, this.keys, RUN_TTL_S);
        if (this.job.policy.kind === 'checkpoint') {
          await store.put(this.job.checkpointDir!, this.job.policy.weights, this.job.run);
        }
      }, signal);
      let resumed = 0;
      if (this.settings.resume) {
        const before = this.committed.size;
        await this.retrying(() => this.drain(), signal);
        resumed = this.committed.size - before;
        this.owner.stats.resumed += resumed;
        await this.retrying(() => this.trackEarlierJobs(), signal);
      }
      await this.retrying(() => this.enqueueChunks(resumed), signal);
      this.lastCheck = performance.now();
      while (!this.done && !signal?.aborted) {
        await this.retrying(async () => {
          this.take(await readResults(this.client.reader, this.keys, this.lastId, 1000));
          if (!this.done && performance.now() - this.lastCheck >= this.settings.checkEveryMs) {
            await this.check();
            this.lastCheck = performance.now();
          }
        }, signal);
      }
      finished = this.done;
    } finally {
      if (finished) await this.cleanUp().catch(() => {});
      else await this.leave().catch(() => {});
    }
    return { threads: Math.max(1, this.workersSeen.size), toolMs: this.toolMs, crashes: this.requeued };
  }

  /**
   * Runs `step`; while Redis is unreachable, tries again every half second, up to waitForRedisMs
   * after it was lost (then a QueueUnavailableError). Other errors go through.
   */
  private async retrying(step: () => Promise<void>, signal?: AbortSignal): Promise<void> {
    for (;;) {
      try {
        await step();
        if (this.downSince !== undefined) {
          this.downSince = undefined;
          this.settings.onEvent?.({ type: 'redis-back' });
        }
        return;
      } catch (err) {
        if (!isConnectionError(err)) throw err;
        const now = performance.now();
        if (this.downSince === undefined) {
          this.downSince = now;
          this.settings.onEvent?.({ type: 'redis-down', reason: reasonOf(err) });
        }
        if (now - this.downSince > this.settings.waitForRedisMs) {
          throw new QueueUnavailableError(
            redactUrl(this.settings.url),
            `${reasonOf(err)} (for ${Math.round((now - this.downSince) / 1000)} s)`,
            'lost the queue',
          );
        }
        if (signal?.aborted) return;
        await sleep(500);
      }
    }
  }

  /** Forgets what an earlier coordinator of this run left (a fresh start): its waiting jobs and results. */
  private async discard(): Promise<void> {
    const { redis, queue } = this.client;
    for (const id of await redis.smembers(this.keys.jobs)) await queue.remove(id).catch(() => 0);
    await redis.del(this.keys.results, this.keys.done, this.keys.jobs);
  }

  /** On --resume: jobs an earlier coordinator made beyond the chunks' own (retries, single episodes). */
  private async trackEarlierJobs(): Promise<void> {
    const { redis, queue } = this.client;
    for (const id of await redis.smembers(this.keys.jobs)) {
      if (this.jobs.has(id)) continue;
      const job = await this.client.Job.fromId<RolloutJobData>(queue, id);
      if (!job?.data?.items) continue;
      // A job no worker could set up for (another scenario version, a missing folder) is made again:
      // kept, its id would stand for the chunk's new job, and fail the resumed run as it failed this one.
      if (job.failedReason?.startsWith(SETUP_FAILED)) {
        await job.remove().catch(() => {});
        continue;
      }
      const items = job.data.items.filter((i) => this.byIndex.has(i.index) && !this.committed.has(i.index));
      if (items.length > 0) this.jobs.set(id, { chunk: job.data.chunk, items });
    }
  }

  private async enqueueChunks(resumed: number): Promise<void> {
    const size = this.settings.chunkSize;
    const items = this.batch.items;
    const adds: { id: string; job: TrackedJob }[] = [];
    for (let c = 0, at = 0; at < items.length; c++, at += size) {
      const missing = items.slice(at, at + size).filter((i) => !this.committed.has(i.index));
      if (missing.length > 0) adds.push({ id: chunkJobId(this.job.run, c), job: { chunk: c, items: missing } });
    }
    await this.add(adds);
    this.settings.onEvent?.({
      type: 'enqueued',
      run: this.job.run,
      jobs: adds.length,
      episodes: adds.reduce((n, a) => n + a.job.items.length, 0),
      resumed,
    });
  }

  /** Adds jobs (a job whose id exists is left as it is: BullMQ ignores the add) and tracks them. */
  private async add(adds: { id: string; job: TrackedJob }[]): Promise<void> {
    if (adds.length === 0) return;
    const { redis, queue } = this.client;
    await redis
      .multi()
      .sadd(this.keys.jobs, ...adds.map((a) => a.id))
      .expire(this.keys.jobs, RUN_TTL_S)
      .exec();
    await queue.addBulk(
      adds.map(({ id, job }) => ({
        name: 'rollout',
        data: this.jobData(job),
        opts: {
          jobId: id,
          attempts: this.settings.attempts,
          backoff: { type: 'exponential', delay: 500 },
          removeOnComplete: true,
          // Failed jobs are read by the coordinator, which removes them; bounded if it never comes back.
          removeOnFail: { age: RUN_TTL_S, count: 10_000 },
        },
      })),
    );
    for (const { id, job } of adds) this.jobs.set(id, job);
  }

  private jobData(job: TrackedJob): RolloutJobData {
    return {
      run: this.job.run,
      chunk: job.chunk,
      scenario: this.job.scenario,
      policy: this.job.policy,
      runId: this.batch.runId,
      config: this.batch.config,
      items: job.items,
      ...(this.batch.concurrency ? { concurrency: this.batch.concurrency } : {}),
    };
  }

  /** Reads every result there is now. */
  private async drain(): Promise<void> {
    for (;;) {
      const entries = await readResults(this.client.redis, this.keys, this.lastId, 0);
      this.take(entries);
      if (entries.length === 0) return;
    }
  }

  private take(entries: ResultEntry[]): void {
    for (const entry of entries) {
      this.lastId = entry.id;
      if (entry.type === 'record') this.takeRecord(entry);
      else if (entry.type === 'end') {
        this.toolMs += entry.toolMs;
        this.workersSeen.add(entry.worker);
      }
    }
  }

  private takeRecord(entry: Extract<ResultEntry, { type: 'record' }>): void {
    if (!this.byIndex.has(entry.index)) return;
    const stats = this.owner.stats;
    const hash = hashOf(entry.line);
    const committed = this.committed.get(entry.index);
    if (committed) {
      stats.duplicates++;
      if (committed.hash !== hash && !committed.synthetic) {
        const item = this.byIndex.get(entry.index)!;
        const fault: DeterminismFault = {
          run: this.job.run,
          index: entry.index,
          episodeId: `${item.task.id}#${item.sample}`,
          committedBy: committed.worker,
          duplicateBy: entry.worker,
        };
        stats.faults.push(fault);
        this.settings.onFault?.(fault);
      }
      return;
    }
    let record: EpisodeRecord;
    try {
      record = parseSealedLine(entry.line);
      if (record.index !== entry.index || record.runId !== this.batch.runId) {
        throw new CorruptRecordError(`episode ${record.index} of run ${record.runId} filed as episode ${entry.index}`);
      }
    } catch (err) {
      // Not committed: the episode is played again when its job is found ended without it.
      this.settings.onEvent?.({ type: 'corrupt', worker: entry.worker, reason: reasonOf(err) });
      return;
    }
    this.commit(entry.index, hash, entry.worker, record);
  }

  private commit(index: number, hash: string, worker: string, record: EpisodeRecord, synthetic = false): void {
    this.committed.set(index, { hash, worker, ...(synthetic ? { synthetic } : {}) });
    this.workersSeen.add(worker);
    if (!synthetic) this.owner.stats.workers[worker] = (this.owner.stats.workers[worker] ?? 0) + 1;
    this.emit(record);
  }

  /**
   * Looks at every job with episodes still missing. The job states are read before the results are
   * drained: a worker writes its records before its job ends, so a job seen ended (or gone) has all
   * its results in the log by then, and whatever is still missing is really lost.
   */
  private async check(): Promise<void> {
    const { redis, queue, store } = this.client;
    const pending = [...this.jobs.entries()];
    const states = await Promise.all(pending.map(([id]) => queue.getJobState(id)));
    await this.drain();
    const adds: { id: string; job: TrackedJob }[] = [];
    for (let k = 0; k < pending.length; k++) {
      const [id, job] = pending[k]!;
      const missing = job.items.filter((i) => !this.committed.has(i.index));
      if (missing.length === 0) {
        this.jobs.delete(id);
        continue;
      }
      const state = states[k]!;
      if (state === 'completed' || state === 'unknown') {
        const reason = state === 'completed' ? 'its job ended without them' : 'its job was lost';
        const next = `${chunkJobId(this.job.run, job.chunk)}-r${randomUUID().slice(0, 8)}`;
        adds.push({ id: next, job: { chunk: job.chunk, items: missing } });
        this.jobs.delete(id);
        this.requeued++;
        this.owner.stats.requeued++;
        this.settings.onEvent?.({ type: 'requeued', job: next, episodes: missing.length, reason });
      } else if (state === 'failed') {
        const failed = await this.client.Job.fromId(queue, id);
        const reason = failed?.failedReason || 'failed';
        if (reason.startsWith(SETUP_FAILED)) {
          // Removed, so that the run resumed on workers that can set up makes this job again.
          await failed?.remove().catch(() => {});
          throw new QueueRunError(
            `a worker${failed?.processedBy ? ` (${failed.processedBy})` : ''} cannot play run ${this.job.run}: ${reason}`,
          );
        }
        this.jobs.delete(id);
        if (missing.length > 1) {
          for (const item of missing) {
            const single = `${this.job.run}-e${item.index}-${randomUUID().slice(0, 8)}`;
            adds.push({ id: single, job: { chunk: job.chunk, items: [item] } });
          }
          this.requeued++;
          this.owner.stats.requeued++;
          this.settings.onEvent?.({ type: 'isolated', job: id, episodes: missing.length, reason });
        } else {
          const record = errorRecord(this.batch, missing[0]!, `its job failed on every attempt: ${reason}`);
          this.owner.stats.gaveUp++;
          this.settings.onEvent?.({ type: 'gave-up', index: missing[0]!.index, reason });
          this.commit(missing[0]!.index, hashOf(serializeRecord(record)), '(coordinator)', record, true);
        }
        await failed?.remove().catch(() => {});
      }
    }
    await this.add(adds);
    // A Redis that lost data (restarted without persistence) gets the run's stream and checkpoint back.
    if ((await redis.exists(this.keys.results)) === 0) await openResults(redis, this.keys, RUN_TTL_S);
    if (this.job.policy.kind === 'checkpoint' && !(await store.has(this.job.policy.weights))) {
      await store.put(this.job.checkpointDir!, this.job.policy.weights, this.job.run);
    }
    // CLIENT LIST may be refused (a managed Redis's ACL): then the count is not told.
    const count = await queue.getWorkersCount().catch((err) => {
      if (isConnectionError(err)) throw err;
      return this.lastWorkerCount;
    });
    if (count !== this.lastWorkerCount) {
      this.lastWorkerCount = count;
      this.settings.onEvent?.({ type: 'workers', count });
    }
  }

  /** A finished run: its jobs, results and claim on the checkpoint go. */
  private async cleanUp(): Promise<void> {
    const { redis, queue, store } = this.client;
    for (const id of await redis.smembers(this.keys.jobs)) await queue.remove(id).catch(() => 0);
    await redis.del(this.keys.results, this.keys.done, this.keys.jobs);
    if (this.job.policy.kind === 'checkpoint') await store.release(this.job.policy.weights, this.job.run);
  }

  /**
   * A stopped run: jobs not yet started are withdrawn; the results and the jobs in play stay (they
   * expire) so that a coordinator started with --resume continues from them.
   */
  private async leave(): Promise<void> {
    const { redis, queue } = this.client;
    for (const id of this.jobs.keys()) {
      const state = await queue.getJobState(id);
      if (state === 'waiting' || state === 'delayed' || state === 'prioritized') await queue.remove(id).catch(() => 0);
    }
    await redis
      .multi()
      .expire(this.keys.results, RUN_TTL_S)
      .expire(this.keys.done, RUN_TTL_S)
      .expire(this.keys.jobs, RUN_TTL_S)
      .exec();
  }
}
