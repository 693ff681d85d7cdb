import type { TrainingSequence } from '../../policy/trajectory.ts';
import { computeAdvantages, type AdvantageResult } from '../advantages.ts';
import { ESTIMATOR_OF, type TrainConfig } from '../config.ts';

/**
 * The batch's advantages (verl: compute_advantage) with the algorithm's estimator, from the shaped
 * token rewards and, for GAE, the rollout-time values (0 off the action tokens).
 */
export function batchAdvantages(
  seqs: readonly TrainingSequence[],
  rewards: readonly number[][],
  oldValues: readonly (readonly number[])[] | null,
  config: TrainConfig,
): AdvantageResult[] {
  return computeAdvantages(
    ESTIMATOR_OF[config.algo],
    seqs.map((s, i) => ({
      rewards: rewards[i]!,
      mask: s.mask,
      group: s.group,
      ...(oldValues ? { values: oldValues[i]!.map((v, t) => (s.mask[t] ? v : 0)) } : {}),
    })),
    { gamma: config.gamma, lambda: config.lambda, normByStd: config.normByStd },
  );
}
