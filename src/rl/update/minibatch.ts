import * as tf from '@tensorflow/tfjs';
import { clipByGlobalNorm, type AdamW } from '../../policy/tfjs/adamw.ts';
import {
  microGradient,
  sumMicroGradients,
  type GradientExecutor,
  type MicroGradient,
} from '../../policy/tfjs/data-parallel.ts';
import type { TrainingSequence } from '../../policy/trajectory.ts';
import type { AdvantageResult } from '../advantages.ts';
import type { TrainConfig } from '../config.ts';
import { klTensor } from '../kl.ts';
import { aggregateLoss, clippedValueLoss, maskedMean, policyGradientLoss, ppoPolicyLoss } from '../losses.ts';
import { GptTrainable } from '../tfjs-trainable.ts';
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
  valueMask: tf.Tensor2D | null;
  oldLp: tf.Tensor2D | null;
  adv: tf.Tensor2D;
  ref: tf.Tensor2D | null;
  returns: tf.Tensor2D | null;
  oldValues: tf.Tensor2D | null;
}

/**
 * One micro-batch of a minibatch step, as plain arrays (what a training replica is sent): its rows
 * and per-token inputs, and the minibatch's count that its losses are divided by.
 */
export interface RlMicroJob {
  config: TrainConfig;
  rows: number[][];
  length: number;
  masks: number[][];
  advantages: number[][];
  oldLogprobs: number[][] | null;
  refLogprobs: number[][] | null;
  returns: number[][] | null;
  oldValues: number[][] | null;
  /** Where the value loss applies when not on the action tokens (step-level PPO: each step's state token). */
  valueMasks: number[][] | null;
  denominator: number;
  /** The minibatch's count for the value loss (its positions, or sequences with any). */
  valueDenominator: number;
  /** The model's pad token (a replica pads the rows with it). */
  pad: number;
}

/**
 * The loss of one micro-batch (verl: compute_policy_loss, entropy bonus, KL loss,
 * compute_value_loss), from the model's outputs with gradients. Its figures go to `metric`, kept.
 */
function microbatchLoss(
  model: Pick<TrainablePolicy, 'score'>,
  job: RlMicroJob,
  t: MicroTensors,
  metric: { [k: string]: tf.Scalar },
): tf.Scalar {
  const { config, rows, length, masks, denominator } = job;
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
      { values: out.values, oldValues: t.oldValues, returns: t.returns, mask: t.valueMask ?? t.mask },
      { clipRange: config.valueClip, aggregation, denominator: job.valueDenominator },
    );
    metric.vf = tf.keep(vl.loss);
    loss = tf.add(loss, tf.mul(config.valueCoef, vl.loss));
  }
  return loss;
}

/**
 * The gradient of one micro-batch's loss with respect to `variables` (the model's), and its
 * figures: on this thread, or in a training replica (which runs exactly this).
 */
export async function rlMicroGradient(
  model: Pick<TrainablePolicy, 'score'>,
  variables: readonly tf.Variable[],
  job: RlMicroJob,
  out?: Float32Array,
): Promise<MicroGradient> {
  const shape: [number, number] = [job.rows.length, job.length];
  const pick = (src: number[][] | null) => (src ? tf.tensor2d(padRows(src, job.length), shape, 'float32') : null);
  const t: MicroTensors = {
    mask: pick(job.masks)!,
    valueMask: pick(job.valueMasks),
    oldLp: pick(job.oldLogprobs),
    adv: pick(job.advantages)!,
    ref: pick(job.refLogprobs),
    returns: pick(job.returns),
    oldValues: pick(job.oldValues),
  };
  try {
    return await microGradient(variables, (metric) => microbatchLoss(model, job, t, metric), out);
  } finally {
    tf.dispose(Object.values(t).filter((x): x is tf.Tensor2D => x !== null));
  }
}

/**
 * One optimizer step on the minibatch `mb` (indices into batch.seqs): the gradients of its
 * micro-batches (computed here, or by `replicas` for a GPT policy) summed in order, clipped by the
 * global norm, then the AdamW update (skipped when the norm is not finite, as verl does). The
 * micro-batches are the same whoever computes them, and so are the weights after the step.
 */
export async function minibatchStep(
  model: TrainablePolicy,
  optimizer: AdamW,
  config: TrainConfig,
  batch: UpdateBatch,
  mb: readonly number[],
  replicas?: GradientExecutor,
): Promise<MinibatchStats> {
  const { seqs, scores, advantages } = batch;
  const { old, refLogprobs } = scores;
  const usePpoValue = config.algo === 'ppo';
  const masks = seqs.map((s) => s.mask);
  // The minibatch's counts, so that micro-batch losses add up to the minibatch's loss.
  const mbTokens = mb.reduce((a, i) => a + masks[i]!.reduce((x, y) => x + y, 0), 0);
  // Sequences with any action token; a step-level episode's steps count once, as its one sequence would.
  const mbSeqs = new Set(
    mb.filter((i) => masks[i]!.includes(1)).map((i) => (seqs[i]!.step === undefined ? i : seqs[i]!.episodeId)),
  ).size;
  const denominator = Math.max(1, config.aggregation === 'token-mean' ? mbTokens : mbSeqs);
  // Step-level PPO trains its critic on each step's state token, not on the action tokens.
  const valueMasks = usePpoValue && advantages.some((a) => a.valueMask) ? advantages.map((a) => a.valueMask!) : null;
  const count = (m: readonly number[]) => m.reduce((x, y) => x + y, 0);
  const valueDenominator = valueMasks
    ? Math.max(
        1,
        config.aggregation === 'token-mean'
          ? mb.reduce((a, i) => a + count(valueMasks[i]!), 0)
          : mb.filter((i) => valueMasks[i]!.includes(1)).length,
      )
    : denominator;
  const gpt = model instanceof GptTrainable ? model : null;
  const jobs: RlMicroJob[] = [];
  const shares: number[] = [];
  for (let ms = 0; ms < mb.length; ms += config.microbatch) {
    const idx = mb.slice(ms, ms + config.microbatch);
    const rows = idx.map((i) => seqs[i]!.tokens);
    const take = (src: readonly (readonly number[])[]) => idx.map((i) => src[i]!.slice());
    const microTokens = idx.reduce((a, i) => a + masks[i]!.reduce((x, y) => x + y, 0), 0);
    shares.push(microTokens / Math.max(1, mbTokens));
    jobs.push({
      config,
      rows: rows.map((r) => r.slice()),
      length: padLength(rows, model.maxLength),
      masks: take(masks),
      advantages: take(advantages.map((a) => a.advantages)),
      oldLogprobs: old ? take(old.logprobs) : null,
      refLogprobs: refLogprobs && config.klMode === 'loss' ? take(refLogprobs) : null,
      returns: usePpoValue ? take(advantages.map((a) => a.returns!)) : null,
      oldValues: usePpoValue ? take(old!.values!) : null,
      valueMasks: valueMasks ? take(valueMasks) : null,
      denominator,
      valueDenominator,
      pad: gpt ? gpt.tokenizer.pad : 0,
    });
  }
  const parts: MicroGradient[] = [];
  if (replicas && gpt) parts.push(...(await replicas.gradients(gpt.model, 'rl', jobs)));
  else for (const job of jobs) parts.push(await rlMicroGradient(model, model.variables, job));
  const weighted: { [k: string]: number } = {};
  const add = (k: string, v: number, w: number) => (weighted[k] = (weighted[k] ?? 0) + v * w);
  parts.forEach(({ stats }, i) => {
    const share = shares[i]!;
    // Losses are already scaled to the minibatch: they add. Per-token rates are weighted by tokens.
    add('pg', stats.pg!, 1);
    if (stats.vf !== undefined) add('vf', stats.vf, 1);
    add('clip', stats.clip ?? 0, share);
    add('dual', stats.dual ?? 0, share);
    add('akl', stats.akl ?? 0, share);
    add('ent', stats.ent!, share);
    if (stats.kl !== undefined) add('kl', stats.kl, share);
  });
  const clipped = await clipByGlobalNorm(sumMicroGradients(model.variables, parts), config.maxGradNorm);
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
