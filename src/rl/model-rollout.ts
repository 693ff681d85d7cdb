import type { EpisodeRecord } from '../core/types.ts';
import { rollout, type RolloutOptions } from '../rollout/rollout.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import type { RolloutSampling, TrainablePolicy } from './trainable.ts';

/**
 * A rollout of a trainable model's current weights: how the trainer and the paper pipeline play
 * episodes. Any implementation must give the records a rollout in this thread would give.
 */
export type ModelRollout = (
  options: Omit<RolloutOptions, 'policy'>,
  model: TrainablePolicy,
  sampling: RolloutSampling,
) => Promise<{ records: EpisodeRecord[]; summary: RolloutSummary }>;

/** Every episode in this thread (the default). */
export const rolloutInThread: ModelRollout = (options, model, sampling) => rollout({ ...options, policy: model.policy(sampling) });
