import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import { buildRecord } from '../episode/run-episode.ts';
import type { Policy } from '../policy/policy.ts';
import type { EpisodePlanItem } from '../rollout/plan.ts';
import type { Scenario } from '../scenario/scenario.ts';

/**
 * The record of an episode whose job failed on every attempt on every worker that took it (as a
 * local run records an episode whose thread kept crashing): an error, not a silent gap.
 */
export function failedRecord(
  batch: { scenario: Scenario; policy: Policy; runId: string; config: EpisodeConfig },
  item: EpisodePlanItem,
  reason: string,
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
      error: `its job failed on every attempt: ${reason}`,
      prompt: [],
    },
  );
}
