import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import { buildRecord } from '../episode/run-episode.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { EpisodePlanItem } from './plan.ts';

/**
 * The record of an episode that could not be played (its thread kept crashing, its job kept
 * failing): an error record, not a silent gap.
 */
export function errorRecord(
  batch: { scenario: Scenario; policy: Policy; runId: string; config: EpisodeConfig },
  item: EpisodePlanItem,
  error: string,
): EpisodeRecord {
  return buildRecord(
    {
      scenario: batch.scenario,
      task: item.task,
      policy: batch.policy,
      seed: item.seed,
      group: item.task.id,
      runId: batch.runId,
    },
    { episodeId: `${item.task.id}#${item.sample}`, index: item.index, sample: item.sample, config: batch.config },
    {
      turns: [],
      answer: null,
      outcome: { reward: 0, success: false },
      totalTokens: 0,
      endReason: 'error',
      error,
      prompt: [],
    },
  );
}
