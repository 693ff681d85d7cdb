import type { TrainingSequence } from '../../policy/trajectory.ts';
import { computeAdvantages, type AdvantageResult } from '../advantages.ts';
import { ESTIMATOR_OF, type TrainConfig } from '../config.ts';

/**
 * The batch's advantages (verl: compute_advantage) with the algorithm's estimator, from the shaped
 * token rewards and, for GAE, the rollout-time values (0 off the action tokens, but for a step-level
 * sample's state token). Step-level samples go as steps of their episodes.
 */
export function batchAdvantages(
  seqs: readonly TrainingSequence[],
  rewards: readonly number[][],
  oldValues: readonly (readonly number[])[] | null,
  config: TrainConfig,
): AdvantageResult[] {
  return computeAdvantages(
    ESTIMATOR_OF[config.algo],
    seqs.map((s, i) => {
      // A step-level sample's state value is its last prompt token's.
      const valueAt = s.step === undefined ? undefined : s.promptLength - 1;
      return {
        rewards: rewards[i]!,
        mask: s.mask,
        group: s.group,
        ...(oldValues ? { values: oldValues[i]!.map((v, t) => (s.mask[t] || t === valueAt ? v : 0)) } : {}),
        ...(s.step === undefined ? {} : { episode: s.episodeId, step: s.step, valueAt }),
      };
    }),
    { gamma: config.gamma, lambda: config.lambda, normByStd: config.normByStd },
  );
}
