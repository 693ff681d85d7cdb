import * as tf from '@tensorflow/tfjs';
import { AgentR1Error } from '../../core/errors.ts';

/**
 * One optimizer for SFT and RL: AdamW (decoupled weight decay), linear warm-up then cosine decay
 * to `minLrRatio × lr`, and clipping by the global gradient norm.
 */
export interface AdamWOptions {
  lr: number;
  /** Steps of linear warm-up from 0 to lr. */
  warmupSteps: number;
  /** Steps of the whole schedule; after it the rate stays at the minimum. */
  totalSteps: number;
  minLrRatio?: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /** Clip the global gradient norm to this (0 or undefined: no clipping). */
  clipNorm?: number;
}

export interface StepStats {
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
  lr: number;
  step: number;
}

export class TrainStepError extends AgentR1Error {}

/** The learning rate at `step` (0-based). */
export function scheduleLr(step: number, o: Pick<AdamWOptions, 'lr' | 'warmupSteps' | 'totalSteps' | 'minLrRatio'>): number {
  const min = o.lr * (o.minLrRatio ?? 0.1);
  if (o.warmupSteps > 0 && step < o.warmupSteps) return (o.lr * (step + 1)) / o.warmupSteps;
  const span = Math.max(1, o.totalSteps - o.warmupSteps);
  const progress = Math.min(1, (step - o.warmupSteps) / span);
  return min + 0.5 * (o.lr - min) * (1 + Math.cos(Math.PI * progress));
}

export class AdamW {
  readonly options: Required<AdamWOptions>;
  step = 0;
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];

  constructor(
    readonly variables: readonly tf.Variable[],
    options: AdamWOptions,
  ) {
    if (!(options.lr > 0)) throw new TrainStepError(`lr must be > 0, got ${options.lr}`);
    if (!(options.totalSteps >= 1)) throw new TrainStepError(`totalSteps must be ≥ 1, got ${options.totalSteps}`);
    if (!(options.warmupSteps >= 0)) throw new TrainStepError(`warmupSteps must be ≥ 0, got ${options.warmupSteps}`);
    this.options = {
      minLrRatio: 0.1,
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-8,
      weightDecay: 0.01,
      clipNorm: 1,
      ...options,
    };
    this.m = variables.map((x) => tf.variable(tf.zerosLike(x), false));
    this.v = variables.map((x) => tf.variable(tf.zerosLike(x), false));
  }

  /**
   * Computes the loss and its gradients, clips, and applies one AdamW update. `lossFn` builds the
   * scalar loss from the model (e.g. with scoreSequences); it runs inside tf.variableGrads.
   * Weight decay skips 1-D weights (biases, layer-norm gains).
   */
  minimize(lossFn: () => tf.Scalar): StepStats {
    const { value, grads } = tf.variableGrads(lossFn, this.variables as tf.Variable[]);
    const names = this.variables.map((x) => x.name);
    const gradList = names.map((n) => grads[n]);
    const loss = value.dataSync()[0]!;
    const gradNorm = tf.tidy(() => tf.sqrt(tf.addN(gradList.map((g) => (g ? g.square().sum() : tf.scalar(0))))).dataSync()[0]!);
    value.dispose();
    if (!Number.isFinite(loss) || !Number.isFinite(gradNorm)) {
      for (const g of gradList) g?.dispose();
      throw new TrainStepError(`non-finite loss (${loss}) or gradient norm (${gradNorm}) at step ${this.step}`);
    }
    const o = this.options;
    const lr = scheduleLr(this.step, o);
    const clip = o.clipNorm > 0 && gradNorm > o.clipNorm ? o.clipNorm / gradNorm : 1;
    const t = this.step + 1;
    const bc1 = 1 - o.beta1 ** t;
    const bc2 = 1 - o.beta2 ** t;
    tf.tidy(() => {
      this.variables.forEach((x, i) => {
        const g0 = gradList[i];
        if (!g0) return;
        const g = clip === 1 ? g0 : g0.mul(clip);
        const m = this.m[i]!.mul(o.beta1).add(g.mul(1 - o.beta1));
        const v = this.v[i]!.mul(o.beta2).add(g.square().mul(1 - o.beta2));
        this.m[i]!.assign(m);
        this.v[i]!.assign(v);
        let update = m.div(bc1).div(v.div(bc2).sqrt().add(o.eps));
        if (o.weightDecay > 0 && x.rank > 1) update = update.add(x.mul(o.weightDecay));
        x.assign(x.sub(update.mul(lr)));
      });
    });
    for (const g of gradList) g?.dispose();
    this.step++;
    return { loss, gradNorm, lr, step: this.step };
  }

  dispose(): void {
    for (const x of [...this.m, ...this.v]) x.dispose();
  }
}

/**
 * Masked token-mean cross-entropy: −Σ mask·logπ / Σ mask, with logprobs from scoreSequences.
 * The SFT loss (mask = the agent's own tokens).
 */
export function maskedNll(logprobs: tf.Tensor2D, mask: tf.Tensor2D): tf.Scalar {
  return tf.tidy(() => logprobs.mul(mask).sum().neg().div(mask.sum().maximum(1)) as tf.Scalar);
}
