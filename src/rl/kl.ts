import * as tf from '@tensorflow/tfjs';
import { RlInputError } from './errors.ts';

/**
 * KL estimators between the policy and a frozen reference, per token, as in verl's `kl_penalty`:
 * k1 = logp − ref; k2 = ½(logp − ref)²; k3 (low variance, always ≥ 0) = exp(ref − logp) − (ref − logp) − 1,
 * with the log-ratio clamped to ±20 and k3 to ±10 so one bad token cannot blow up a step.
 */
export const KL_ESTIMATORS = ['k1', 'k2', 'k3'] as const;
export type KlEstimator = (typeof KL_ESTIMATORS)[number];

function checkEstimator(estimator: string): asserts estimator is KlEstimator {
  if (!(KL_ESTIMATORS as readonly string[]).includes(estimator)) {
    throw new RlInputError(`unknown KL estimator "${estimator}"; valid: ${KL_ESTIMATORS.join(', ')}`);
  }
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/** One token's KL estimate from its log-prob under the policy and under the reference. */
export function klToken(logprob: number, refLogprob: number, estimator: KlEstimator): number {
  checkEstimator(estimator);
  const d = logprob - refLogprob;
  if (estimator === 'k1') return d;
  if (estimator === 'k2') return 0.5 * d * d;
  const kl = clamp(-d, -20, 20);
  return clamp(Math.exp(kl) - kl - 1, -10, 10);
}

/** Tensor version (any shape, elementwise); differentiable in `logprobs`. */
export function klTensor(logprobs: tf.Tensor, refLogprobs: tf.Tensor, estimator: KlEstimator): tf.Tensor {
  checkEstimator(estimator);
  if (!arraysEqual(logprobs.shape, refLogprobs.shape)) {
    throw new RlInputError(`KL: logprobs shape [${logprobs.shape}] differs from reference [${refLogprobs.shape}]`);
  }
  return tf.tidy(() => {
    const d = tf.sub(logprobs, refLogprobs);
    if (estimator === 'k1') return d;
    if (estimator === 'k2') return tf.mul(0.5, tf.square(d));
    const kl = tf.clipByValue(tf.neg(d), -20, 20);
    return tf.clipByValue(tf.sub(tf.sub(tf.exp(kl), kl), 1), -10, 10);
  });
}

/**
 * KL as a reward penalty (verl's `apply_kl_penalty`): r_t − β·kl_t on action tokens, unchanged elsewhere.
 * Applied to token rewards before GAE or REINFORCE++.
 */
export function applyKlPenalty(
  rewards: readonly number[],
  logprobs: readonly number[],
  refLogprobs: readonly number[],
  mask: readonly number[],
  coef: number,
  estimator: KlEstimator = 'k1',
): { rewards: number[]; kl: number[] } {
  checkEstimator(estimator);
  if (!Number.isFinite(coef) || coef < 0) throw new RlInputError(`KL coefficient must be ≥ 0, got ${coef}`);
  const n = rewards.length;
  if (logprobs.length !== n || refLogprobs.length !== n || mask.length !== n) {
    throw new RlInputError(
      `KL penalty: rewards (${n}), logprobs (${logprobs.length}), reference (${refLogprobs.length}) and mask (${mask.length}) differ in length`,
    );
  }
  const kl = rewards.map((_, t) => (mask[t] === 1 ? klToken(logprobs[t]!, refLogprobs[t]!, estimator) : 0));
  return { rewards: rewards.map((r, t) => r - coef * kl[t]!), kl };
}

export function arraysEqual(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
