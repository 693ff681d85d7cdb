import { createRng } from '../../core/rng.ts';
import type { AdamW } from '../../policy/tfjs/adamw.ts';
import type { GradientExecutor } from '../../policy/tfjs/data-parallel.ts';
import { fitToContext, trainingUnits, type TrainingSequence } from '../../policy/trajectory.ts';
import type { TrainConfig } from '../config.ts';
import { TrainingError } from '../errors.ts';
import type { TrainablePolicy } from '../trainable.ts';
import { batchAdvantages } from './advantages.ts';
import { emptyMetrics, updateMetrics, type UpdateMetrics } from './metrics.ts';
import { minibatchStep, type MinibatchStats } from './minibatch.ts';
import { shapeRewards } from './rewards.ts';
import { scoreBatch, type Scorer } from './score.ts';

/**
 * One rollout batch's update, in verl's order: score (the rollout-time log-probs and values, the
 * reference's log-probs) → shape the token rewards (KL penalty in the reward) → advantages → then
 * `epochs` passes of shuffled minibatches, one optimizer step each → metrics. `shuffleSeed` fixes
 * the minibatch order, so a resumed run repeats it exactly. `replicas` computes a GPT policy's
 * micro-batch gradients in other threads (the same weights come out).
 */
export async function updateOnBatch(
  model: TrainablePolicy,
  ref: Scorer | null,
  optimizer: AdamW,
  config: TrainConfig,
  allSeqs: readonly TrainingSequence[],
  shuffleSeed: number,
  options: { recomputeOld?: boolean; onAdvantages?: (values: number[]) => void; replicas?: GradientExecutor } = {},
): Promise<UpdateMetrics> {
  const seqs = allSeqs.map((s) => fitToContext(s, model.maxLength)).filter((s): s is TrainingSequence => s !== null);
  const tooLong = allSeqs.length - seqs.length;
  const usePpoValue = config.algo === 'ppo';
  if (usePpoValue && !model.hasValueHead) {
    throw new TrainingError('PPO needs a model with a value head');
  }
  if (seqs.length === 0) return emptyMetrics(tooLong);

  const scores = await scoreBatch(model, ref, config, seqs, options);
  const shaped = shapeRewards(seqs, scores.old?.logprobs ?? null, scores.refLogprobs, config);
  const advantages = batchAdvantages(seqs, shaped.rewards, scores.old?.values ?? null, config);
  options.onAdvantages?.(seqs.flatMap((s, i) => advantages[i]!.advantages.filter((_, t) => s.mask[t] === 1)));

  const rng = createRng(shuffleSeed);
  const steps: { epoch: number; stats: MinibatchStats }[] = [];
  // Minibatches of `minibatch` units: sequences, or (step-level) episodes with all their steps.
  const units = trainingUnits(seqs);
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    const order = rng.shuffle(units.map((_, i) => i));
    for (let start = 0; start < order.length; start += config.minibatch) {
      const mb = order.slice(start, start + config.minibatch).flatMap((u) => units[u]!);
      const stats = await minibatchStep(model, optimizer, config, { seqs, scores, advantages }, mb, options.replicas);
      steps.push({ epoch, stats });
    }
  }
  await model.weightsChanged();
  const masks = seqs.map((s) => s.mask);
  return updateMetrics({ masks, tooLong, usePpoValue, rewardKl: shaped.kl, advantages, steps });
}
