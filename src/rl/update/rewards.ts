import type { TrainingSequence } from '../../policy/trajectory.ts';
import type { TrainConfig } from '../config.ts';
import { applyKlPenalty } from '../kl.ts';

/**
 * The token rewards an update learns from (verl: apply_kl_penalty): the episodes' own, with the
 * KL penalty to the reference folded in when the KL goes into the reward (klMode 'reward'). Then
 * `kl` holds each sequence's per-token KL estimate, for the metrics; otherwise it is null.
 */
export function shapeRewards(
  seqs: readonly TrainingSequence[],
  oldLogprobs: readonly (readonly number[])[] | null,
  refLogprobs: readonly (readonly number[])[] | null,
  config: TrainConfig,
): { rewards: number[][]; kl: number[][] | null } {
  let kl: number[][] | null = null;
  const rewards = seqs.map((s, i) => {
    if (!refLogprobs || config.klMode !== 'reward') return s.rewards.slice();
    const r = applyKlPenalty(s.rewards, oldLogprobs![i]!, refLogprobs[i]!, s.mask, config.klCoef, config.klEstimator);
    (kl ??= []).push(r.kl);
    return r.rewards;
  });
  return { rewards, kl };
}
