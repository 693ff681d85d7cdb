import * as tf from '@tensorflow/tfjs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentR1Error } from '../../core/errors.ts';

/**
 * The one optimizer, for SFT and RL: AdamW (decoupled weight decay on matrices only), an optional
 * warm-up + cosine learning-rate schedule, and clipping by the global gradient norm.
 *
 * Its whole state is in plain view, so a checkpoint restores it bit for bit: tfjs's own Adam
 * rebuilds its β-powers with pow() on restore, which differs in the last bit from the running
 * product and breaks exact resume. Bias corrections are computed in float64 from the step count.
 */
export class OptimizerError extends AgentR1Error {}

export interface LrSchedule {
  /** Steps of linear warm-up from 0 to lr. */
  warmupSteps: number;
  /** Steps of the whole schedule; after it the rate stays at the minimum. */
  totalSteps: number;
  /** The floor of the cosine decay, as a share of lr (default 0.1). */
  minLrRatio?: number;
}

/**
 * How the decay λ enters the update, with u = m̂ / (√v̂ + ε) the Adam step. The two are equal in
 * exact arithmetic but not in float32, so each trainer keeps the form its results were made with:
 * - `torch`: p ← p·(1 − lr·λ) − lr·u (torch.optim.AdamW; the RL trainer);
 * - `optax`: p ← p − lr·(u + λ·p) (optax.adamw: the decay added to the update; SFT).
 */
export type DecayForm = 'torch' | 'optax';

export interface AdamWOptions {
  /** The learning rate (the peak of the schedule when there is one). */
  lr: number;
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Default 1e-8. */
  eps?: number;
  /** Decoupled weight decay (Loshchilov & Hutter), on matrices only (not biases, norms). Default 0. */
  weightDecay?: number;
  /** Default `torch`. */
  decayForm?: DecayForm;
  /** Warm-up then cosine decay (scheduleLr); without one the rate stays at lr. */
  schedule?: LrSchedule;
  /** minimize() clips the global gradient norm to this (0 or undefined: no clipping). */
  clipNorm?: number;
  /** ε of minimize()'s clip scale clipNorm / (‖g‖ + ε). Default 1e-6, as torch's clip_grad_norm_. */
  clipEps?: number;
}

export interface StepStats {
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  lr: number;
  /** Updates done, this one included. */
  step: number;
}

/** The learning rate at `step` (0-based): linear warm-up, then cosine decay to `minLrRatio × lr`. */
export function scheduleLr(step: number, o: { lr: number } & LrSchedule): number {
  const min = o.lr * (o.minLrRatio ?? 0.1);
  if (o.warmupSteps > 0 && step < o.warmupSteps) return (o.lr * (step + 1)) / o.warmupSteps;
  const span = Math.max(1, o.totalSteps - o.warmupSteps);
  const progress = Math.min(1, (step - o.warmupSteps) / span);
  return min + 0.5 * (o.lr - min) * (1 + Math.cos(Math.PI * progress));
}

/** ‖g‖ over every gradient of the map, √(Σ Σ g²), summed in the map's order. */
export async function globalNorm(grads: tf.NamedTensorMap): Promise<number> {
  const names = Object.keys(grads);
  if (names.length === 0) return 0;
  const normT = tf.tidy(() => tf.sqrt(tf.addN(names.map((n) => tf.sum(tf.square(grads[n]!))))));
  try {
    return (await normT.data())[0]!;
  } finally {
    normT.dispose();
  }
}

/**
 * Global gradient-norm clipping (torch's `clip_grad_norm_`): scale every gradient by
 * min(1, maxNorm / (‖g‖ + eps)). Returns the norm before clipping; a non-finite norm is returned
 * as is (with the gradients untouched) so the caller can skip that update, as verl does. The
 * gradients handed in are disposed when scaled copies replace them.
 */
export async function clipByGlobalNorm(
  grads: tf.NamedTensorMap,
  maxNorm: number,
  eps = 1e-6,
): Promise<{ grads: tf.NamedTensorMap; norm: number }> {
  if (!(maxNorm > 0)) throw new OptimizerError(`max grad norm must be > 0, got ${maxNorm}`);
  const names = Object.keys(grads);
  if (names.length === 0) return { grads, norm: 0 };
  const norm = await globalNorm(grads);
  if (!Number.isFinite(norm)) return { grads, norm };
  const scale = Math.min(1, maxNorm / (norm + eps));
  if (scale === 1) return { grads, norm };
  const out: tf.NamedTensorMap = {};
  for (const n of names) {
    out[n] = tf.mul(grads[n]!, scale);
    grads[n]!.dispose();
  }
  return { grads: out, norm };
}

export class AdamW {
  readonly lr: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  readonly decayForm: DecayForm;
  readonly schedule: LrSchedule | null;
  readonly clipNorm: number;
  readonly clipEps: number;
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];
  private t = 0;

  constructor(
    readonly variables: readonly tf.Variable[],
    options: AdamWOptions,
  ) {
    this.lr = options.lr;
    this.beta1 = options.beta1 ?? 0.9;
    this.beta2 = options.beta2 ?? 0.999;
    this.eps = options.eps ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 0;
    this.decayForm = options.decayForm ?? 'torch';
    this.schedule = options.schedule ?? null;
    this.clipNorm = options.clipNorm ?? 0;
    this.clipEps = options.clipEps ?? 1e-6;
    if (!(this.lr > 0)) throw new OptimizerError(`learning rate must be > 0, got ${this.lr}`);
    if (this.schedule) {
      const { totalSteps, warmupSteps } = this.schedule;
      if (!(totalSteps >= 1)) throw new OptimizerError(`totalSteps must be ≥ 1, got ${totalSteps}`);
      if (!(warmupSteps >= 0)) throw new OptimizerError(`warmupSteps must be ≥ 0, got ${warmupSteps}`);
    }
    this.m = variables.map((x) => tf.variable(tf.zerosLike(x), false));
    this.v = variables.map((x) => tf.variable(tf.zerosLike(x), false));
  }

  /** Updates done. */
  get steps(): number {
    return this.t;
  }

  /** The learning rate of the next update. */
  currentLr(): number {
    return this.schedule ? scheduleLr(this.t, { lr: this.lr, ...this.schedule }) : this.lr;
  }

  /** One update at the current rate; `grads` maps variable names to gradients (missing ones are left alone). */
  step(grads: tf.NamedTensorMap): void {
    const lr = this.currentLr();
    this.t++;
    const c1 = 1 - this.beta1 ** this.t;
    const c2 = 1 - this.beta2 ** this.t;
    const decayLr = 1 - lr * this.weightDecay;
    // A tidy per stage of each variable: temporaries live for one stage, so the peak is a few copies of
    // the largest weight (a 151k-row embedding is 0.35–0.6 GB), not of every weight at once.
    this.variables.forEach((p, i) => {
      const g = grads[p.name];
      if (!g) return;
      const m = this.m[i]!;
      const v = this.v[i]!;
      tf.tidy(() => m.assign(tf.add(tf.mul(m, this.beta1), tf.mul(g, 1 - this.beta1))));
      tf.tidy(() => v.assign(tf.add(tf.mul(v, this.beta2), tf.mul(tf.square(g), 1 - this.beta2))));
      tf.tidy(() => {
        let update = tf.div(tf.div(m, c1), tf.add(tf.sqrt(tf.div(v, c2)), this.eps));
        const decays = this.weightDecay > 0 && p.rank >= 2;
        if (this.decayForm === 'torch') {
          p.assign(tf.sub(decays ? tf.mul(p, decayLr) : p, tf.mul(update, lr)));
        } else {
          if (decays) update = tf.add(update, tf.mul(p, this.weightDecay));
          p.assign(tf.sub(p, tf.mul(update, lr)));
        }
      });
    });
  }

  /**
   * Computes the loss and its gradients, clips them (clipNorm), and applies one update. `lossFn`
   * builds the scalar loss from the model (e.g. with scoreSequences); it runs inside
   * tf.variableGrads. A non-finite loss or gradient norm throws, with the state untouched.
   */
  async minimize(lossFn: () => tf.Scalar): Promise<StepStats> {
    const { value, grads } = tf.variableGrads(lossFn, this.variables as tf.Variable[]);
    let loss: number;
    try {
      loss = (await value.data())[0]!;
    } catch (error) {
      tf.dispose(Object.values(grads));
      throw error;
    } finally {
      value.dispose();
    }
    return this.applyGradients(loss, grads);
  }

  /**
   * minimize() after the gradients: clips `grads` (clipNorm) and applies one update; a non-finite
   * loss or gradient norm throws, with the state untouched. The gradients are disposed. For
   * gradients computed elsewhere (summed over micro-batches, see data-parallel.ts).
   */
  async applyGradients(loss: number, grads: tf.NamedTensorMap): Promise<StepStats> {
    const clipped =
      this.clipNorm > 0
        ? await clipByGlobalNorm(grads, this.clipNorm, this.clipEps)
        : { grads, norm: await globalNorm(grads) };
    try {
      if (!Number.isFinite(loss) || !Number.isFinite(clipped.norm)) {
        throw new OptimizerError(`non-finite loss (${loss}) or gradient norm (${clipped.norm}) at step ${this.t}`);
      }
      const lr = this.currentLr();
      this.step(clipped.grads);
      return { loss, gradNorm: clipped.norm, lr, step: this.t };
    } finally {
      tf.dispose(Object.values(clipped.grads));
    }
  }

  /** Writes adamw.json (step count, lr, names, shapes) and adamw.bin (m then v, float32) into dir. */
  async save(dir: string): Promise<void> {
    const parts = (await Promise.all([...this.m, ...this.v].map((x) => x.data()))) as Float32Array[];
    const total = parts.reduce((a, p) => a + p.length, 0);
    const bin = new Float32Array(total);
    let offset = 0;
    for (const p of parts) {
      bin.set(p, offset);
      offset += p.length;
    }
    await writeFile(join(dir, 'adamw.bin'), new Uint8Array(bin.buffer));
    const manifest = { t: this.t, lr: this.lr, vars: this.variables.map((x) => ({ name: x.name, shape: x.shape })) };
    await writeFile(join(dir, 'adamw.json'), JSON.stringify(manifest));
  }

  /** Restores what save() wrote (the step count and the moments; the variables must match in number and shape). */
  async load(dir: string): Promise<void> {
    const manifest = JSON.parse(await readFile(join(dir, 'adamw.json'), 'utf8')) as {
      t: number;
      vars: { name: string; shape: number[] }[];
    };
    if (manifest.vars.length !== this.variables.length) {
      const [saved, model] = [manifest.vars.length, this.variables.length];
      throw new OptimizerError(`optimizer state has ${saved} variables, the model ${model}`);
    }
    manifest.vars.forEach((saved, i) => {
      const shape = this.variables[i]!.shape;
      if (saved.shape.join(',') !== shape.join(',')) {
        throw new OptimizerError(`optimizer state for variable ${i} has shape [${saved.shape}], the model [${shape}]`);
      }
    });
    const buf = await readFile(join(dir, 'adamw.bin'));
    const all = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    let offset = 0;
    for (const x of [...this.m, ...this.v]) {
      const n = x.size;
      if (offset + n > all.length) throw new OptimizerError('optimizer state file is too short');
      tf.tidy(() => x.assign(tf.tensor(all.slice(offset, offset + n), x.shape, 'float32')));
      offset += n;
    }
    this.t = manifest.t;
  }

  dispose(): void {
    for (const x of [...this.m, ...this.v]) x.dispose();
  }
}
