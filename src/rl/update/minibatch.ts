import * as tf from '@tensorflow/tfjs';
import { clipByGlobalNorm, type AdamW } from '../../policy/tfjs/adamw.ts';
import type { TrainingSequence } from '../../policy/trajectory.ts';
import type { AdvantageResult } from '../advantages.ts';
import type { TrainConfig } from '../config.ts';
import { klTensor } from '../kl.ts';
import { aggregateLoss, clippedValueLoss, maskedMean, policyGradientLoss, ppoPolicyLoss } from '../losses.ts';
import type { TrainablePolicy } from '../trainable.ts';
import type { BatchScores } from './score.ts';
import { padLength, padRows } from './score.ts';

/** What every minibatch step of one batch reads: the sequences, and what was computed before the update. */
export interface UpdateBatch {
  seqs: readonly TrainingSequence[];
  scores: BatchScores;
  advantages: readonly AdvantageResult[];
}

/**
 * One minibatch step's figures. Losses are the minibatch's (its micro-batches' add up to it);
 * rates are per action token. Undefined: no such term (value loss without PPO, loss KL without
 * klMode 'loss').
 */
export interface MinibatchStats {
  pg: number;
  vf?: number;
  clip: number;
  dual: number;
  akl: number;
  ent: number;
  kl?: number;
  /** Global grad norm before clipping. */
  gradNorm: number;
  /** False when a non-finite gradient made the step be skipped. */
  stepped: boolean;
}

interface MicroTensors {
  mask: tf.Tensor2D;
  oldLp: tf.Tensor2D | null;
  adv: tf.Tensor2D;
  ref: tf.Tensor2D | null;
  returns: tf.Tensor2D | null;
  oldValues: tf.Tensor2D | null;
}

/**
 * The loss of one micro-batch (verl: compute_policy_loss, entropy bonus, KL loss,
 * compute_value_loss), from the model's outputs with gradients. Its figures go to `metric`, kept.
 */
function microbatchLoss(
  model: TrainablePolicy,
  config: TrainConfig,
  rows: number[][],
  length: number,
  masks: number[][],
  t: MicroTensors,
  denominator: number,
  metric: { [k: string]: tf.Scalar },
): tf.Scalar {
  const usePpoValue = config.algo === 'ppo';
  const { aggregation } = config;
  const { temperature } = config;
  const out = model.score({ tokens: rows, length, values: usePpoValue, entropy: true, temperature, mask: masks });
  let loss: tf.Scalar;
  if (t.oldLp) {
    const pg = ppoPolicyLoss(
      { logprobs: out.logprobs, oldLogprobs: t.oldLp, advantages: t.adv, mask: t.mask },
      { clipLow: config.clipLow, clipHigh: config.clipHigh, dualClip: config.dualClip, aggregation, denominator },
    );
    loss = pg.loss;
    Object.assign(metric, {
      pg: tf.keep(pg.loss),
      clip: tf.keep(pg.clipFraction),
      dual: tf.keep(pg.dualClipFraction),
      akl: tf.keep(pg.approxKl),
    });
  } else {
    loss = policyGradientLoss({ logprobs: out.logprobs, advantages: t.adv, mask: t.mask }, aggregation, denominator);
    // the PPO objective's value at ratio 1
    metric.pg = tf.keep(aggregateLoss(tf.neg(t.adv), t.mask, aggregation, denominator));
  }
  metric.ent = tf.keep(maskedMean(out.entropy!, t.mask));
  if (config.entropyCoef > 0) {
    loss = tf.sub(loss, tf.mul(config.entropyCoef, aggregateLoss(out.entropy!, t.mask, aggregation, denominator)));
  }
  if (t.ref) {
    const kl = klTensor(out.logprobs, t.ref, config.klEstimator);
    metric.kl = tf.keep(maskedMean(kl, t.mask));
    loss = tf.add(loss, tf.mul(config.klCoef, aggregateLoss(kl, t.mask, aggregation, denominator)));
  }
  if (t.returns && t.oldValues && out.values) {
    const vl = clippedValueLoss(
      { values: out.values, oldValues: t.oldValues, returns: t.returns, mask: t.mask },
      { clipRange: config.valueClip, aggregation, denominator },
    );
    metric.vf = tf.keep(vl.loss);
    loss = tf.add(loss, tf.mul(config.valueCoef, vl.loss));
  }
  return loss;
}

/**
 * One optimizer step on the minibatch `mb` (indices into batch.seqs): the gradients of its
 * micro-batches summed in order, clipped by the global norm, then the AdamW update (skipped when
 * the norm is not finite, as verl does).
 */
export function minibatchStep(
  model: TrainablePolicy,
  optimizer: AdamW,
  config: TrainConfig,
  batch: UpdateBatch,
  mb: readonly number[],
): MinibatchStats {
  const { seqs, scores, advantages } = batch;
  const { old, refLogprobs } = scores;
  const usePpoValue = config.algo === 'ppo';
  const masks = seqs.map((s) => s.mask);
  // The minibatch's counts, so that micro-batch losses add up to the minibatch's loss.
  const mbTokens = mb.reduce((a, i) => a + masks[i]!.reduce((x, y) => x + y, 0), 0);
  const mbSeqs = mb.filter((i) => masks[i]!.includes(1)).length;
  const denominator = Math.max(1, config.aggregation === 'token-mean' ? mbTokens : mbSeqs);
  const weighted: { [k: string]: number } = {};
  const add = (k: string, v: number, w: number) => (weighted[k] = (weighted[k] ?? 0) + v * w);
  let gradSum: tf.NamedTensorMap | null = null;
  for (let ms = 0; ms < mb.length; ms += config.microbatch) {
    const idx = mb.slice(ms, ms + config.microbatch);
    const rows = idx.map((i) => seqs[i]!.tokens);
    const length = padLength(rows, model.maxLength);
    const pick = (src: readonly (readonly number[])[]) =>
      tf.tensor2d(
        padRows(
          idx.map((i) => src[i]!),
          length,
        ),
        [idx.length, length],
        'float32',
      );
    const microTokens = idx.reduce((a, i) => a + masks[i]!.reduce((x, y) => x + y, 0), 0);
    const share = microTokens / Math.max(1, mbTokens);
    const t: MicroTensors = {
      mask: pick(masks),
      oldLp: old ? pick(old.logprobs) : null,
      adv: pick(advantages.map((a) => a.advantages)),
      ref: refLogprobs && config.klMode === 'loss' ? pick(refLogprobs) : null,
      returns: usePpoValue ? pick(advantages.map((a) => a.returns!)) : null,
      oldValues: usePpoValue ? pick(old!.values!) : null,
    };
    const metric: { [k: string]: tf.Scalar } = {};
    const microMasks = idx.map((i) => masks[i]!);
    const { value, grads } = tf.variableGrads(
      () => microbatchLoss(model, config, rows, length, microMasks, t, denominator, metric),
      model.variables,
    );
    if (gradSum === null) gradSum = grads;
    else {
      const prev: tf.NamedTensorMap = gradSum;
      gradSum = Object.fromEntries(
        Object.keys(prev).map((k) => [k, grads[k] ? tf.add(prev[k]!, grads[k]!) : prev[k]!]),
      );
      tf.dispose([...Object.values(prev).filter((x) => !Object.values(gradSum!).includes(x)), ...Object.values(grads)]);
    }
    const read = (k: string) => (metric[k] ? metric[k]!.dataSync()[0]! : undefined);
    // Losses are already scaled to the minibatch: they add. Per-token rates are weighted by tokens.
    add('pg', read('pg')!, 1);
    if (metric.vf) add('vf', read('vf')!, 1);
    add('clip', read('clip') ?? 0, share);
    add('dual', read('dual') ?? 0, share);
    add('akl', read('akl') ?? 0, share);
    add('ent', read('ent')!, share);
    if (metric.kl) add('kl', read('kl')!, share);
    const inputs = [t.oldLp, t.ref, t.returns, t.oldValues].filter((x): x is tf.Tensor2D => x !== null);
    tf.dispose([value, ...Object.values(metric), t.mask, t.adv, ...inputs]);
  }
  const clipped = clipByGlobalNorm(gradSum!, config.maxGradNorm);
  const stepped = Number.isFinite(clipped.norm);
  if (stepped) optimizer.step(clipped.grads);
  tf.dispose(Object.values(clipped.grads));
  return {
    pg: weighted.pg!,
    ...(weighted.vf !== undefined ? { vf: weighted.vf } : {}),
    clip: weighted.clip!,
    dual: weighted.dual!,
    akl: weighted.akl!,
    ent: weighted.ent!,
    ...(weighted.kl !== undefined ? { kl: weighted.kl } : {}),
    gradNorm: clipped.norm,
    stepped,
  };
}
