import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Piscina } from 'piscina';
import type { EpisodeRecord } from '../core/types.ts';
import { WORKER_URL } from '../rollout/parallel-rollout.ts';
import { rollout, type RolloutOptions } from '../rollout/rollout.ts';
import { summarizeRecords } from '../rollout/summary.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { TrainingError } from './errors.ts';
import type { ModelRollout } from './model-rollout.ts';
import type { RolloutSampling, TrainablePolicy } from './trainable.ts';

/** The part of a rollout's options that crosses to the replica's thread. */
export type ReplicaRolloutOptions = Omit<RolloutOptions, 'scenario' | 'policy' | 'onRecord' | 'signal'>;

/** What the main thread sends the replica worker (workers/replica.ts); no job = load and wait. */
export interface ReplicaTask {
  scenario: { source: string; options: { [key: string]: string } };
  backend: string;
  job?: {
    checkpoint: string;
    /** The weights' content hash: the replica refuses a checkpoint that is not these weights. */
    version: string;
    policyId: string;
    sampling: RolloutSampling;
    rollout: ReplicaRolloutOptions;
  };
}

export interface ReplicaTaskResult {
  records: EpisodeRecord[];
  seconds: number;
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
 * Rollouts over two threads: a copy of the model in a worker thread (loaded from a checkpoint of
 * the current weights, saved when they change) plays the second half of the episodes while this
 * thread plays the first. Episodes depend only on their seeds, never on batching or threads, so
 * the records are byte-for-byte those of a rollout in this thread. Only GptTrainable models (whose
 * checkpoints the worker can load) can be replicated. If the replica fails, its half is played
 * here (same records) and `onFallback` hears why.
 */
export class ReplicaRollouts {
  private readonly pool: Piscina;
  private readonly source: ReplicaTask['scenario'];
  private scratch: Promise<string> | undefined;
  private savedVersion = '';
  /** Seconds the replica spent on its halves. */
  replicaSeconds = 0;
  failures = 0;

  constructor(
    scenario: Scenario,
    private readonly backend: string,
    private readonly options: { scenarioSource?: string; onFallback?: (error: Error) => void } = {},
  ) {
    this.source = { source: options.scenarioSource ?? scenario.id, options: scenario.options };
    this.pool = new Piscina({ filename: WORKER_URL, name: 'replica', minThreads: 1, maxThreads: 1, execArgv: [] });
    // Load tfjs and build the scenario now; a failure here fails the first job, which falls back.
    this.pool.run({ scenario: this.source, backend } satisfies ReplicaTask).catch(() => {});
  }

  readonly run: ModelRollout = async (options, model, sampling) => {
    if (options.range) throw new TrainingError('a replicated rollout splits the whole run; it takes no range');
    const policy = model.policy(sampling);
    const split = Math.ceil(options.episodes / 2);
    const theirs = { start: split, end: options.episodes };
    const { scenario: _s, onRecord: _o, signal: _g, ...rest } = options;
    const checkpoint = await this.save(model);
    const job: ReplicaTask['job'] = { checkpoint, version: policy.version, policyId: policy.id, sampling, rollout: { ...rest, range: theirs } };
    const remote = this.pool.run({ scenario: this.source, backend: this.backend, job } satisfies ReplicaTask) as Promise<ReplicaTaskResult>;
    remote.catch(() => {});
    // onRecord hears every record in episode order once both halves are in.
    const here = { ...options, onRecord: undefined, policy };
    const mine = await rollout({ ...here, range: { start: 0, end: split } });
    let other: EpisodeRecord[] = [];
    if (mine.records.length < split) {
      // Stopped by the signal: like an in-thread rollout, return the episodes before the stop.
      await remote.catch(() => {});
    } else {
      try {
        const result = await remote;
        this.replicaSeconds += result.seconds;
        other = result.records;
      } catch (err) {
        this.failures++;
        this.options.onFallback?.(err instanceof Error ? err : new Error(String(err)));
        other = (await rollout({ ...here, range: theirs })).records;
      }
    }
    const records = [...mine.records, ...other];
    for (const r of records) options.onRecord?.(r);
    return { records, summary: summarizeRecords(records, options.scenario) };
  };

  async close(): Promise<void> {
    await this.pool.destroy();
    if (this.scratch) await rm(await this.scratch, { recursive: true, force: true });
  }

  /** The current weights as a checkpoint the worker can load (written once per version). */
  private async save(model: TrainablePolicy): Promise<string> {
    this.scratch ??= mkdtemp(join(tmpdir(), 'agent-r1-replica-'));
    const dir = join(await this.scratch, 'policy');
    if (this.savedVersion !== model.version()) {
      await model.save(dir);
      this.savedVersion = model.version();
    }
    return dir;
  }
}
