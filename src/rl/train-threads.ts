import * as tf from '@tensorflow/tfjs';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { AgentR1Error } from '../core/errors.ts';
import {
  readWeights,
  trainThreadsFor,
  weightLayout,
  type GradientExecutor,
  type MicroGradient,
} from '../policy/tfjs/data-parallel.ts';
import type { ModelConfig } from '../architectures/gpt/model-config.ts';
import type { GPTModel } from '../architectures/gpt/model.ts';
import { MAX_TRAIN_THREADS } from '../rollout/worker-count.ts';
import { workerEntryUrl } from '../rollout/worker-entry.ts';

/** A replica's task failed (its error, rethrown here), or replicas kept dying on one micro-batch. */
export class ReplicaError extends AgentR1Error {}

/** The weights a replica computes with: the trainer's, shared, rewritten once per call. */
export interface ReplicaModelSpec {
  /** Which master model (a replica rebuilds itself when it changes). */
  key: string;
  /** Which weights of it (a replica reloads them when it changes). */
  version: number;
  config: ModelConfig;
  /** Every variable, float32, in the model's order (see weightLayout). */
  weights: SharedArrayBuffer;
}

/** One micro-batch for a replica (workers/train.ts). */
export interface TrainTask {
  backend: string;
  model: ReplicaModelSpec;
  /** 'sft' (SftMicroJob) or 'rl' (RlMicroJob). */
  kind: string;
  job: unknown;
  /** Where the replica writes the gradient (float32, the weights' layout). */
  out: SharedArrayBuffer;
  /** Tests: the replica's thread exits after computing, before it answers (a crash mid-step). */
  exit?: boolean;
}

export type TrainTaskResult =
  | { ok: true; present: number[]; stats: { [key: string]: number } }
  | { ok: false; name: string; message: string };

export interface TrainThreadsOptions {
  /** Replicas, one per thread (default: one per core). */
  threads?: number;
  /** The tfjs backend the replicas load (default: this thread's). */
  backend?: string;
  /** Deaths of replicas one micro-batch may see before the step fails (default 3). */
  maxAttempts?: number;
}

/**
 * Model replicas in Piscina worker threads that compute micro-batch gradients for a trainer that
 * keeps the master weights and the optimizer (GradientExecutor). Each call shares the current
 * weights through one SharedArrayBuffer (each replica copies them in once per call), and each job
 * writes its gradient into a SharedArrayBuffer of its own: nothing goes through files. Jobs go to
 * whichever replica is free; the result does not depend on which, since the caller sums them in
 * job order. A replica that dies is replaced and its job computed again.
 */
export class TrainThreads implements GradientExecutor {
  readonly threads: number;
  /** Replicas that died and were replaced (their micro-batches computed again). */
  crashes = 0;
  /** Calls to gradients() so far. */
  calls = 0;
  /** Tests: the replica that computes job `job` of call number `call` (0-based) dies before it answers, once. */
  crashAt: { call: number; job: number } | undefined;
  private pool: Piscina | undefined;
  private weights: SharedArrayBuffer | undefined;
  private slots: SharedArrayBuffer[] = [];
  private readonly keys = new WeakMap<GPTModel, string>();
  private models = 0;
  private busy = false;

  constructor(private readonly options: TrainThreadsOptions = {}) {
    this.threads = Math.max(1, options.threads ?? availableParallelism());
  }

  async gradients(model: GPTModel, kind: string, jobs: readonly unknown[]): Promise<MicroGradient[]> {
    if (this.busy) throw new ReplicaError('training replicas are busy with another call');
    this.busy = true;
    try {
      const call = this.calls++;
      const variables = model.trainableVariables;
      const { total } = weightLayout(variables);
      const bytes = total * 4;
      if (this.weights?.byteLength !== bytes) {
        this.weights = new SharedArrayBuffer(bytes);
        this.slots = [];
      }
      await readWeights(variables, new Float32Array(this.weights));
      while (this.slots.length < jobs.length) this.slots.push(new SharedArrayBuffer(bytes));
      let key = this.keys.get(model);
      if (!key) this.keys.set(model, (key = `m${this.models++}`));
      const spec: ReplicaModelSpec = { key, version: call, config: model.config, weights: this.weights };
      const backend = this.options.backend ?? tf.getBackend();
      const pool = (this.pool ??= createPool(this.threads));
      const maxAttempts = this.options.maxAttempts ?? 3;
      const crashAt = this.crashAt;
      const runJob = async (job: unknown, i: number): Promise<MicroGradient> => {
        const out = this.slots[i]!;
        for (let attempt = 1; ; attempt++) {
          const exit = attempt === 1 && crashAt?.call === call && crashAt.job === i;
          const task: TrainTask = { backend, model: spec, kind, job, out, ...(exit ? { exit } : {}) };
          let result: TrainTaskResult;
          try {
            result = (await pool.run(task, { name: 'train' })) as TrainTaskResult;
          } catch (error) {
            // The replica's thread died (its own errors come back as results): another computes the job.
            this.crashes++;
            if (attempt >= maxAttempts) {
              const why = error instanceof Error ? error.message : String(error);
              throw new ReplicaError(`training replicas died ${attempt} times on ${kind} micro-batch ${i}: ${why}`);
            }
            continue;
          }
          if (!result.ok) throw new ReplicaError(`${kind} micro-batch ${i} failed in a replica: ${result.message}`);
          return { grads: new Float32Array(out, 0, total), present: result.present, stats: result.stats };
        }
      };
      // Settled, not raced: no replica may still read the weights when the caller changes them.
      const settled = await Promise.allSettled(jobs.map(runJob));
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      return settled.map((s) => (s as PromiseFulfilledResult<MicroGradient>).value);
    } finally {
      this.busy = false;
    }
  }

  async close(): Promise<void> {
    await this.pool?.destroy();
    this.pool = undefined;
  }
}

/**
 * The replicas for `--train-threads N` on `backend`: none for one thread, or where the backend
 * cannot load in threads; never more threads than `cores` (each replica is a model copy and a
 * thread; past the cores they only contend, and thousands exhaust memory). The weights are the same
 * for any number. `note` says why fewer than asked, to be said once.
 */
export function trainReplicas(
  backend: string,
  requested: number = availableParallelism(),
  cores: number = availableParallelism(),
): { replicas?: TrainThreads; threads: number; note?: string } {
  if (!(Number.isInteger(requested) && requested >= 1 && requested <= MAX_TRAIN_THREADS))
    throw new ReplicaError(`training threads must be an integer from 1 to ${MAX_TRAIN_THREADS}, got ${requested}`);
  const onCores = threadsOnCores(requested, cores);
  const byBackend = trainThreadsFor(backend, onCores.threads);
  const threads = byBackend.threads;
  const note = byBackend.note ?? onCores.note;
  return {
    threads,
    ...(note ? { note } : {}),
    ...(threads > 1 ? { replicas: new TrainThreads({ threads, backend }) } : {}),
  };
}

/**
 * Training threads past the cores only contend: `requested` capped at `cores`, with the note to say
 * once when it was (the GPT's replicas and a Hugging Face model's kernels alike).
 */
export function threadsOnCores(
  requested: number,
  cores: number = availableParallelism(),
): { threads: number; note?: string } {
  const threads = Math.min(requested, Math.max(1, cores));
  if (threads === requested) return { threads };
  return { threads, note: `training on ${threads} threads: ${requested} asked, this machine has ${cores} cores` };
}

function createPool(threads: number): Piscina {
  const pool = new Piscina({
    filename: workerEntryUrl(),
    execArgv: [],
    minThreads: threads,
    maxThreads: threads,
    concurrentTasksPerWorker: 1,
  });
  // A dying replica fails its task, which is retried; the pool-level event adds nothing.
  pool.on('error', () => {});
  return pool;
}
