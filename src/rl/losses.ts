import * as tf from '@tensorflow/tfjs';
import { RlInputError } from './errors.ts';
import { arraysEqual } from './kl.ts';

/**
 * The policy-gradient losses as tfjs functions of per-token tensors [batch, time], independent of
 * the model: the trainer computes log-probs (and values, entropy) with the model inside its
 * gradient function and hands them here. Formulas follow verl's `core_algos.py`.
 */

export const LOSS_AGGREGATIONS = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const;
export type LossAggregation = (typeof LOSS_AGGREGATIONS)[number];

function checkAggregation(mode: string): asserts mode is LossAggregation {
  if (!(LOSS_AGGREGATIONS as readonly string[]).includes(mode)) {
    throw new RlInputError(`unknown loss aggregation "${mode}"; valid: ${LOSS_AGGREGATIONS.join(', ')}`);
  }
}

function checkShapes(named: { [name: string]: tf.Tensor }): void {
  const entries = Object.entries(named);
  const [firstName, first] = entries[0]!;
  if (first.rank !== 2) throw new RlInputError(`${firstName} must be [batch, time], got shape [${first.shape}]`);
  for (const [name, t] of entries.slice(1)) {
    if (!arraysEqual(t.shape, first.shape)) {
      throw new RlInputError(`${name} has shape [${t.shape}] but ${firstName} has [${first.shape}]`);
    }
  }
}

/** Mean over masked positions; 0 when nothing is masked (an empty minibatch must not give NaN). */
export function maskedMean(x: tf.Tensor, mask: tf.Tensor): tf.Scalar {
  return tf.tidy(() => tf.div(tf.sum(tf.mul(x, mask)), tf.maximum(tf.sum(mask), 1)) as tf.Scalar);
}

/**
 * verl's `agg_loss`: token-mean = mean over every action token of the batch; seq-mean-token-sum =
 * mean over sequences of each sequence's token sum; seq-mean-token-mean = mean over sequences of each
 * sequence's token mean. Sequences without action tokens do not count.
 */
export function aggregateLoss(
  loss: tf.Tensor,
  mask: tf.Tensor,
  mode: LossAggregation = 'token-mean',
  denominator?: number,
): tf.Scalar {
  checkAggregation(mode);
  checkShapes({ loss, mask });
  if (denominator !== undefined && !(denominator > 0))
    throw new RlInputError(`loss denominator must be > 0, got ${denominator}`);
  return tf.tidy(() => {
    // With gradient accumulation, the caller passes the whole minibatch's count (action tokens, or
    // sequences with any) so that the micro-batches' losses add up to the minibatch's.
    if (mode === 'token-mean') {
      return denominator === undefined
        ? maskedMean(loss, mask)
        : (tf.div(tf.sum(tf.mul(loss, mask)), denominator) as tf.Scalar);
    }
    const tokens = tf.sum(mask, 1);
    const present = tf.cast(tf.greater(tokens, 0), 'float32');
    let perSeq = tf.sum(tf.mul(loss, mask), 1);
    if (mode === 'seq-mean-token-mean') perSeq = tf.div(perSeq, tf.maximum(tokens, 1));
    const count = denominator === undefined ? tf.maximum(tf.sum(present), 1) : tf.scalar(denominator);
    return tf.div(tf.sum(tf.mul(perSeq, present)), count) as tf.Scalar;
  });
}

export interface PolicyLossInput {
  logprobs: tf.Tensor;
  oldLogprobs: tf.Tensor;
  advantages: tf.Tensor;
  mask: tf.Tensor;
}

export interface PolicyLossOptions {
  /** ε_low: the ratio is clipped below at 1 − ε_low. Default 0.2. */
  clipLow?: number;
  /** ε_high: the ratio is clipped above at 1 + ε_high. Default: clipLow. */
  clipHigh?: number;
  /** Dual-clip constant c for negative advantages (loss ≤ −A·c); null disables it. Default 3. */
  dualClip?: number | null;
  aggregation?: LossAggregation;
  /** See aggregateLoss: the minibatch's count when this is one micro-batch of it. */
  denominator?: number;
}

export interface PolicyLossResult {
  loss: tf.Scalar;
  /** Share of action tokens where the ratio clip was active. */
  clipFraction: tf.Scalar;
  /** Share of action tokens where the dual clip was active. */
  dualClipFraction: tf.Scalar;
  /** mean(old − new) over action tokens: a first-order KL(old ‖ new) estimate. */
  approxKl: tf.Scalar;
}

/** PPO's clipped surrogate with asymmetric clipping and dual-clip (verl `compute_policy_loss`). */
export function ppoPolicyLoss(input: PolicyLossInput, options: PolicyLossOptions = {}): PolicyLossResult {
  const clipLow = options.clipLow ?? 0.2;
  const clipHigh = options.clipHigh ?? clipLow;
  const dualClip = options.dualClip === undefined ? 3 : options.dualClip;
  const aggregation = options.aggregation ?? 'token-mean';
  if (!(clipLow >= 0 && clipLow < 1)) throw new RlInputError(`clipLow must be in [0, 1), got ${clipLow}`);
  if (!(clipHigh >= 0)) throw new RlInputError(`clipHigh must be ≥ 0, got ${clipHigh}`);
  if (dualClip !== null && !(dualClip > 1)) throw new RlInputError(`dualClip must be > 1 (or null), got ${dualClip}`);
  checkAggregation(aggregation);
  const { logprobs, oldLogprobs, advantages, mask } = input;
  checkShapes({ logprobs, oldLogprobs, advantages, mask });
  return tf.tidy(() => {
    const logRatio = tf.clipByValue(tf.sub(logprobs, oldLogprobs), -20, 20);
    const ratio = tf.exp(logRatio);
    const negA = tf.neg(advantages);
    const loss1 = tf.mul(negA, ratio);
    const loss2 = tf.mul(negA, tf.clipByValue(ratio, 1 - clipLow, 1 + clipHigh));
    const clipped = tf.maximum(loss1, loss2);
    const clipFraction = maskedMean(tf.cast(tf.greater(loss2, loss1), 'float32'), mask);
    let perToken: tf.Tensor = clipped;
    let dualClipFraction: tf.Scalar = tf.scalar(0);
    if (dualClip !== null) {
      const loss3 = tf.mul(negA, dualClip);
      const negative = tf.less(advantages, 0);
      perToken = tf.where(negative, tf.minimum(clipped, loss3), clipped);
      dualClipFraction = maskedMean(tf.cast(tf.logicalAnd(negative, tf.greater(clipped, loss3)), 'float32'), mask);
    }
    return {
      loss: aggregateLoss(perToken, mask, aggregation, options.denominator),
      clipFraction,
      dualClipFraction,
      approxKl: maskedMean(tf.neg(logRatio), mask),
    };
  });
}

export interface ValueLossInput {
  values: tf.Tensor;
  /** The values at rollout time (the clip is around these). */
  oldValues: tf.Tensor;
  returns: tf.Tensor;
  mask: tf.Tensor;
}

/** PPO's clipped value loss: ½·agg(max((v − R)², (clip(v, v_old ± ε) − R)²)) (verl `compute_value_loss`). */
export function clippedValueLoss(
  input: ValueLossInput,
  options: { clipRange?: number; aggregation?: LossAggregation; denominator?: number } = {},
): { loss: tf.Scalar; clipFraction: tf.Scalar } {
  const clipRange = options.clipRange ?? 0.2;
  if (!(clipRange >= 0)) throw new RlInputError(`value clip range must be ≥ 0, got ${clipRange}`);
  const { values, oldValues, returns, mask } = input;
  checkShapes({ values, oldValues, returns, mask });
  return tf.tidy(() => {
    const clippedV = tf.clipByValue(tf.sub(values, oldValues), -clipRange, clipRange).add(oldValues);
    const l1 = tf.square(tf.sub(values, returns));
    const l2 = tf.square(tf.sub(clippedV, returns));
    return {
      loss: tf.mul(
        0.5,
        aggregateLoss(tf.maximum(l1, l2), mask, options.aggregation ?? 'token-mean', options.denominator),
      ) as tf.Scalar,
      clipFraction: maskedMean(tf.cast(tf.greater(l2, l1), 'float32'), mask),
    };
  });
}

/** Plain REINFORCE-style surrogate −A·logp (what PPO reduces to at ratio 1, in value and gradient). */
export function policyGradientLoss(
  input: Omit<PolicyLossInput, 'oldLogprobs'>,
  aggregation: LossAggregation = 'token-mean',
  denominator?: number,
): tf.Scalar {
  checkShapes({ logprobs: input.logprobs, advantages: input.advantages, mask: input.mask });
  return tf.tidy(() =>
    aggregateLoss(tf.mul(tf.neg(input.advantages), input.logprobs), input.mask, aggregation, denominator),
  );
}
