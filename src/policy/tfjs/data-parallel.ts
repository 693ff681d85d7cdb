import * as tf from '@tensorflow/tfjs';
import { AgentR1Error } from '../../core/errors.ts';
import type { GPTModel } from '../../architectures/gpt/model.ts';

/**
 * Data-parallel training, the part every trainer shares: a step's batch is cut into micro-batches
 * (a partition that depends on the batch only, never on the number of threads); each micro-batch's
 * gradient is computed, on this thread or on a model replica in another (a GradientExecutor); they
 * are summed here in micro-batch order and the optimizer steps once. A fixed partition and a fixed
 * sum order make the weights bit-identical whatever the number of threads.
 */
export class GradientError extends AgentR1Error {}

/** One micro-batch's gradient, flattened in the order of the model's variables. */
export interface MicroGradient {
  /** Every variable's gradient at its offset (see weightLayout); zeros where `present` lacks it. */
  grads: Float32Array;
  /** Indices of the variables the loss reaches (the others get no gradient and no update). */
  present: readonly number[];
  /** The micro-batch's figures: `loss` (its share of the step's loss) and the trainer's metrics. */
  stats: { [key: string]: number };
}

/** Where each variable sits in a flat float32 buffer of all of them. */
export interface WeightLayout {
  total: number;
  entries: { shape: number[]; offset: number; size: number }[];
}

export function weightLayout(variables: readonly tf.Variable[]): WeightLayout {
  let offset = 0;
  const entries = variables.map((v) => {
    if (v.dtype !== 'float32') throw new GradientError(`variable ${v.name} is ${v.dtype}; expected float32`);
    const e = { shape: v.shape.slice(), offset, size: v.size };
    offset += v.size;
    return e;
  });
  return { total: offset, entries };
}

/** Copies every variable into `into` (the layout's order and offsets). */
export async function readWeights(variables: readonly tf.Variable[], into: Float32Array): Promise<void> {
  const { entries, total } = weightLayout(variables);
  if (into.length < total) throw new GradientError(`weight buffer holds ${into.length} floats, needs ${total}`);
  const data = await Promise.all(variables.map((v) => v.data()));
  data.forEach((d, i) => into.set(d as Float32Array, entries[i]!.offset));
}

/** Assigns every variable from `from` (what readWeights wrote). */
export function writeWeights(variables: readonly tf.Variable[], from: Float32Array): void {
  const { entries, total } = weightLayout(variables);
  if (from.length < total) throw new GradientError(`weight buffer holds ${from.length} floats, needs ${total}`);
  tf.tidy(() =>
    variables.forEach((v, i) => {
      const e = entries[i]!;
      // slice(): a copy, so a shared buffer is never read after this returns
      v.assign(tf.tensor(from.slice(e.offset, e.offset + e.size), e.shape, 'float32'));
    }),
  );
}

/**
 * The gradient of `lossFn` (a micro-batch's loss) with respect to `variables`, written into `out`
 * (or a new buffer). `metrics` are scalars the loss function keeps (tf.keep); they are read into
 * the stats and disposed.
 */
export async function microGradient(
  variables: readonly tf.Variable[],
  lossFn: (metrics: { [key: string]: tf.Scalar }) => tf.Scalar,
  out?: Float32Array,
): Promise<MicroGradient> {
  const layout = weightLayout(variables);
  const grads = out ?? new Float32Array(layout.total);
  if (grads.length < layout.total) throw new GradientError(`gradient buffer holds ${grads.length} floats`);
  const metrics: { [key: string]: tf.Scalar } = {};
  const { value, grads: named } = tf.variableGrads(() => lossFn(metrics), variables as tf.Variable[]);
  try {
    const present: number[] = [];
    // All reads at once: on a GPU backend each is a round trip, and they overlap.
    const [gradData, scalars] = await Promise.all([
      Promise.all(variables.map((v) => named[v.name]?.data())),
      Promise.all([value, ...Object.values(metrics)].map((m) => m.data())),
    ]);
    variables.forEach((_, i) => {
      const e = layout.entries[i]!;
      const g = gradData[i];
      if (g) {
        present.push(i);
        grads.set(g as Float32Array, e.offset);
      } else grads.fill(0, e.offset, e.offset + e.size);
    });
    const stats: { [key: string]: number } = { loss: scalars[0]![0]! };
    Object.keys(metrics).forEach((k, i) => (stats[k] = scalars[i + 1]![0]!));
    return { grads, present, stats };
  } finally {
    tf.dispose([value, ...Object.values(named), ...Object.values(metrics)]);
  }
}

/**
 * The step's gradient: the micro-batches' summed in their order (float32, as tf.add would), as
 * tensors keyed by the variables' names, for the variables some micro-batch has a gradient for.
 * The caller disposes them (AdamW.applyGradients does).
 */
export function sumMicroGradients(
  variables: readonly tf.Variable[],
  parts: readonly MicroGradient[],
): tf.NamedTensorMap {
  const { entries } = weightLayout(variables);
  const out: tf.NamedTensorMap = {};
  entries.forEach(({ offset, size, shape }, i) => {
    let sum: Float32Array | null = null;
    for (const part of parts) {
      if (!part.present.includes(i)) continue;
      const g = part.grads;
      if (sum === null) sum = g.slice(offset, offset + size);
      // Float32Array stores round each double sum to float32: the same bits as a float32 add.
      else for (let j = 0; j < size; j++) sum[j] = sum[j]! + g[offset + j]!;
    }
    if (sum) out[variables[i]!.name] = tf.tensor(sum, shape, 'float32');
  });
  return out;
}

/**
 * Adds `part` into `sum` (its buffer and loss; float32, as sumMicroGradients adds them in order), so
 * a step over many micro-batches holds two gradients at a time rather than one per micro-batch.
 */
export function addMicroGradient(sum: MicroGradient, part: MicroGradient): MicroGradient {
  const present = new Set(sum.present);
  const g = sum.grads;
  for (const i of part.present) present.add(i);
  for (let j = 0; j < g.length; j++) g[j] = g[j]! + part.grads[j]!;
  return {
    grads: g,
    present: [...present].sort((a, b) => a - b),
    stats: { ...sum.stats, loss: sum.stats.loss! + part.stats.loss! },
  };
}

/** What a gradient executor computes: a job kind the replicas know ('sft', 'rl') and its micro-batches. */
export interface GradientExecutor {
  /** Replicas computing at once. */
  readonly threads: number;
  /**
   * Each job's gradient at the current weights of `model` (sent to the replicas once per call), in
   * job order. The results' buffers are valid until the next call.
   */
  gradients(model: GPTModel, kind: string, jobs: readonly unknown[]): Promise<MicroGradient[]>;
}

/**
 * How many training threads a backend can use: the wasm and cpu backends compute on one core per
 * thread, so a replica per thread puts the other cores to work; the tfjs-node bindings do not load
 * in worker threads (and use the cores themselves), and on webgpu the one GPU device does the work,
 * so there training stays on this thread and `note` says so.
 */
export function trainThreadsFor(backend: string, requested: number): { threads: number; note?: string } {
  if (!(Number.isInteger(requested) && requested >= 1))
    throw new GradientError(`training threads must be an integer ≥ 1, got ${requested}`);
  if (backend === 'wasm' || backend === 'cpu' || requested === 1) return { threads: requested };
  if (backend === 'webgpu') return { threads: 1, note: 'training on one thread: on webgpu the GPU does the work' };
  return {
    threads: 1,
    note: `training on one thread: the ${backend} backend's bindings do not load in worker threads (it uses the cores itself)`,
  };
}
