import * as tf from '@tensorflow/tfjs';
import { createRng } from '../core/rng.ts';
import { clipByGlobalNorm, type AdamW } from '../policy/tfjs/adamw.ts';
import { fitToContext, type TrainingSequence } from '../policy/trajectory.ts';
import { computeAdvantages } from './advantages.ts';
import { TrainingError } from './errors.ts';
import { ESTIMATOR_OF, type TrainConfig } from './config.ts';
import { applyKlPenalty, klTensor } from './kl.ts';
import { aggregateLoss, clippedValueLoss, maskedMean, policyGradientLoss, ppoPolicyLoss } from './losses.ts';
import type { ScoreOutput, TrainablePolicy } from './trainable.ts';

/** Scores sequences without gradients, in chunks; returns plain per-token arrays. */
export interface Scorer {
  score: TrainablePolicy['score'];
}

export interface UpdateMetrics {
  /** Sequences trained on, and their action tokens. */
  sequences: number;
  actionTokens: number;
  /** Sequences dropped because no action token fits in the model's context. */
  tooLong: number;
  policyLoss: number;
  valueLoss: number | null;
  /** Mean KL(π ‖ ref) estimate over action tokens (null without a reference). */
  kl: number | null;
  /** Mean entropy of the policy over action tokens (first epoch's forward passes). */
  entropy: number;
  clipFraction: number;
  dualClipFraction: number;
  /** mean(old − new log-prob) over the minibatches: how far the updates moved the policy. */
  approxKl: number;
  /** Mean and max global grad norm (before clipping) over the optimizer steps. */
  gradNorm: number;
  gradNormMax: number;
  /** Optimizer steps skipped for a non-finite gradient. */
  skippedSteps: number;
  optimizerSteps: number;
  advantageMean: number;
  advantageAbsMean: number;
}

/** Pad length: the longest row rounded up to a multiple of 16, so minibatch shapes repeat. */
export function padLength(rows: readonly (readonly number[])[], maxLength: number): number {
  const longest = rows.reduce((a, r) => Math.max(a, r.length), 1);
  return Math.min(maxLength, Math.ceil(longest / 16) * 16);
}

function padRows(rows: readonly (readonly number[])[], length: number): number[][] {
  return rows.map((r) => {
    const out = r.slice(0, length);
    while (out.length < length) out.push(0);
    return out;
  });
}

/** Per-token outputs of a scorer over many sequences, `chunk` rows per forward pass, no gradients. */
export function scoreAll(
  scorer: Scorer & { maxLength: number },
  seqs: readonly TrainingSequence[],
  chunk: number,
  want: { values?: boolean; entropy?: boolean; temperature?: number },
): { logprobs: number[][]; values: number[][] | null; entropy: number[][] | null } {
  const logprobs: number[][] = [];
  const values: number[][] = [];
  const entropy: number[][] = [];
  for (let start = 0; start < seqs.length; start += chunk) {
    const part = seqs.slice(start, start + chunk);
    const rows = part.map((s) => s.tokens);
    const length = padLength(rows, scorer.maxLength);
    const out: ScoreOutput = scorer.score({ tokens: rows, length, values: want.values, entropy: want.entropy, temperature: want.temperature, mask: part.map((s) => s.mask) });
    try {
      const lp = out.logprobs.arraySync();
      const v = want.values && out.values ? out.values.arraySync() : null;
      const e = want.entropy && out.entropy ? out.entropy.arraySync() : null;
      part.forEach((s, i) => {
        logprobs.push(lp[i]!.slice(0, s.tokens.length));
        if (v) values.push(v[i]!.slice(0, s.tokens.length));
        if (e) entropy.push(e[i]!.slice(0, s.tokens.length));
      });
    } finally {
      tf.dispose([out.logprobs, out.values, out.entropy].filter((x): x is tf.Tensor2D => x !== undefined));
    }
  }
  return { logprobs, values: want.values ? values : null, entropy: want.entropy ? entropy : null };
}

function maskedMeanOf(rows: readonly (readonly number[])[], masks: readonly (readonly number[])[]): number {
  let sum = 0;
  let n = 0;
  rows.forEach((r, i) => r.forEach((x, t) => {
    if (masks[i]![t] === 1) {
      sum += x;
      n++;
    }
  }));
  return n === 0 ? 0 : sum / n;
}

const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/**
 * One rollout batch's update: score with the current (rollout-time) weights for the old log-probs,
 * values and entropy; the reference's log-probs for KL; token rewards (KL penalty when it goes into
 * the reward); advantages; then `epochs` passes of shuffled minibatches, one optimizer step each.
 * `shuffleSeed` fixes the minibatch order, so a resumed run repeats it exactly.
 */
export function updateOnBatch(
  model: TrainablePolicy,
  ref: Scorer | null,
  optimizer: AdamW,
  config: TrainConfig,
  allSeqs: readonly TrainingSequence[],
  shuffleSeed: number,
  options: { recomputeOld?: boolean } = {},
): UpdateMetrics {
  const seqs = allSeqs.map((s) => fitToContext(s, model.maxLength)).filter((s): s is TrainingSequence => s !== null);
  const tooLong = allSeqs.length - seqs.length;
  const usePpoValue = config.algo === 'ppo';
  if (usePpoValue && !model.hasValueHead) {
    throw new TrainingError('PPO needs a model with a value head');
  }
  const empty: UpdateMetrics = {
    sequences: 0, actionTokens: 0, tooLong, policyLoss: 0, valueLoss: null, kl: null, entropy: 0, clipFraction: 0,
    dualClipFraction: 0, approxKl: 0, gradNorm: 0, gradNormMax: 0, skippedSteps: 0, optimizerSteps: 0, advantageMean: 0, advantageAbsMean: 0,
  };
  if (seqs.length === 0) return empty;
  const masks = seqs.map((s) => s.mask);
  // Scoring passes without gradients go in micro-batches too: 64 rows of 768 tokens at once need
  // 600 MB per attention tensor, past the wasm heap (4 GB) — which then fails as memory corruption.
  const chunk = config.microbatch;
  // One update on the whole batch, on-policy: the ratio is exactly 1 at that single step, so the
  // PPO surrogate's gradient is the policy gradient −A·∇logπ and the separate "old log-prob"
  // forward pass (verl's recompute) would only reproduce the current log-probs. Skip it.
  const onPolicy =
    !options.recomputeOld && config.epochs === 1 && seqs.length <= config.minibatch && !usePpoValue && config.klMode !== 'reward';
  // Every pass scores at the rollout temperature: the ratio, KL and entropy are of the policy that acted.
  const temperature = config.temperature;
  const old = onPolicy ? null : scoreAll(model, seqs, chunk, { values: usePpoValue, entropy: false, temperature });
  const useKl = config.klMode !== 'none' && config.klCoef > 0 && ref !== null;
  const refLp = useKl ? scoreAll({ ...ref, maxLength: model.maxLength }, seqs, chunk, { temperature }).logprobs : null;

  // Token rewards, with the KL penalty folded in when it goes into the reward.
  let rewardKl: number[][] | null = null;
  const rewards = seqs.map((s, i) => {
    if (!refLp || config.klMode !== 'reward') return s.rewards.slice();
    const r = applyKlPenalty(s.rewards, old!.logprobs[i]!, refLp[i]!, s.mask, config.klCoef, config.klEstimator);
    (rewardKl ??= []).push(r.kl);
    return r.rewards;
  });
  const adv = computeAdvantages(
    ESTIMATOR_OF[config.algo],
    seqs.map((s, i) => ({ rewards: rewards[i]!, mask: s.mask, group: s.group, ...(old?.values ? { values: old.values[i]!.map((v, t) => (s.mask[t] ? v : 0)) } : {}) })),
    { gamma: config.gamma, lambda: config.lambda, normByStd: config.normByStd },
  );

  const rng = createRng(shuffleSeed);
  const stats = { pg: [] as number[], vf: [] as number[], clip: [] as number[], dual: [] as number[], akl: [] as number[], gn: [] as number[], ent: [] as number[], kl: [] as number[] };
  let skipped = 0;
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    const order = rng.shuffle(seqs.map((_, i) => i));
    for (let start = 0; start < order.length; start += config.minibatch) {
      const mb = order.slice(start, start + config.minibatch);
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
        const pick = (src: readonly (readonly number[])[]) => tf.tensor2d(padRows(idx.map((i) => src[i]!), length), [idx.length, length], 'float32');
        const microTokens = idx.reduce((a, i) => a + masks[i]!.reduce((x, y) => x + y, 0), 0);
        const share = microTokens / Math.max(1, mbTokens);
        const mask = pick(masks);
        const oldLp = old ? pick(old.logprobs) : null;
        const advT = pick(adv.map((a) => a.advantages));
        const refT = refLp && config.klMode === 'loss' ? pick(refLp) : null;
        const retT = usePpoValue ? pick(adv.map((a) => a.returns!)) : null;
        const oldV = usePpoValue ? pick(old!.values!) : null;
        const metric: { [k: string]: tf.Scalar } = {};
        const { value, grads } = tf.variableGrads(() => {
          const out = model.score({ tokens: rows, length, values: usePpoValue, entropy: true, temperature, mask: idx.map((i) => masks[i]!) });
          let loss: tf.Scalar;
          if (oldLp) {
            const pg = ppoPolicyLoss(
              { logprobs: out.logprobs, oldLogprobs: oldLp, advantages: advT, mask },
              { clipLow: config.clipLow, clipHigh: config.clipHigh, dualClip: config.dualClip, aggregation: config.aggregation, denominator },
            );
            loss = pg.loss;
            Object.assign(metric, { pg: tf.keep(pg.loss), clip: tf.keep(pg.clipFraction), dual: tf.keep(pg.dualClipFraction), akl: tf.keep(pg.approxKl) });
          } else {
            loss = policyGradientLoss({ logprobs: out.logprobs, advantages: advT, mask }, config.aggregation, denominator);
            // the PPO objective's value at ratio 1
            metric.pg = tf.keep(aggregateLoss(tf.neg(advT), mask, config.aggregation, denominator));
          }
          metric.ent = tf.keep(maskedMean(out.entropy!, mask));
          if (config.entropyCoef > 0) loss = tf.sub(loss, tf.mul(config.entropyCoef, aggregateLoss(out.entropy!, mask, config.aggregation, denominator)));
          if (refT) {
            const kl = klTensor(out.logprobs, refT, config.klEstimator);
            metric.kl = tf.keep(maskedMean(kl, mask));
            loss = tf.add(loss, tf.mul(config.klCoef, aggregateLoss(kl, mask, config.aggregation, denominator)));
          }
          if (retT && oldV && out.values) {
            const vl = clippedValueLoss(
              { values: out.values, oldValues: oldV, returns: retT, mask },
              { clipRange: config.valueClip, aggregation: config.aggregation, denominator },
            );
            metric.vf = tf.keep(vl.loss);
            loss = tf.add(loss, tf.mul(config.valueCoef, vl.loss));
          }
          return loss;
        }, model.variables);
        if (gradSum === null) gradSum = grads;
        else {
          const prev: tf.NamedTensorMap = gradSum;
          gradSum = Object.fromEntries(Object.keys(prev).map((k) => [k, grads[k] ? tf.add(prev[k]!, grads[k]!) : prev[k]!]));
          tf.dispose([...Object.values(prev).filter((t) => !Object.values(gradSum!).includes(t)), ...Object.values(grads)]);
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
        tf.dispose([value, ...Object.values(metric), mask, advT, ...[oldLp, refT, retT, oldV].filter((x): x is tf.Tensor2D => x !== null)]);
      }
      const clipped = clipByGlobalNorm(gradSum!, config.maxGradNorm);
      if (Number.isFinite(clipped.norm)) optimizer.step(clipped.grads);
      else skipped++;
      stats.pg.push(weighted.pg!);
      stats.clip.push(weighted.clip!);
      stats.dual.push(weighted.dual!);
      stats.akl.push(weighted.akl!);
      if (epoch === 0) stats.ent.push(weighted.ent!);
      if (epoch === 0 && weighted.kl !== undefined) stats.kl.push(weighted.kl);
      if (weighted.vf !== undefined) stats.vf.push(weighted.vf);
      stats.gn.push(clipped.norm);
      tf.dispose(Object.values(clipped.grads));
    }
  }
  model.weightsChanged();
  const advRows = adv.map((a) => a.advantages);
  return {
    sequences: seqs.length,
    actionTokens: masks.reduce((a, m) => a + m.reduce((x, y) => x + y, 0), 0),
    tooLong,
    policyLoss: mean(stats.pg),
    valueLoss: usePpoValue ? mean(stats.vf) : null,
    kl: rewardKl ? maskedMeanOf(rewardKl, masks) : stats.kl.length ? mean(stats.kl) : null,
    entropy: mean(stats.ent),
    clipFraction: mean(stats.clip),
    dualClipFraction: mean(stats.dual),
    approxKl: mean(stats.akl),
    gradNorm: mean(stats.gn.filter(Number.isFinite)),
    gradNormMax: stats.gn.reduce((a, b) => Math.max(a, b), 0),
    skippedSteps: skipped,
    optimizerSteps: stats.gn.length - skipped,
    advantageMean: maskedMeanOf(advRows, masks),
    advantageAbsMean: maskedMeanOf(advRows.map((r) => r.map(Math.abs)), masks),
  };
}
