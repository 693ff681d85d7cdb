import type { EndReason, EpisodeRecord } from '../core/types.ts';
import type { Scenario, Summarizer } from '../scenario/scenario.ts';

export interface RolloutSummary {
  episodes: number;
  successRate: number;
  meanReward: number;
  meanTurns: number;
  /** Episodes that ended in an error (status 'error'). */
  failed: number;
  byEndReason: Partial<Record<EndReason, number>>;
  [key: string]: unknown;
}

/**
 * The scenario-independent metrics plus the scenario's own, folded over records one at a time (in
 * episode order: the sums, and so the means, come out the same to the last bit on every run), so a
 * run's summary never needs the run held in memory.
 */
export function rolloutSummarizer(scenario?: Scenario): Summarizer<RolloutSummary> {
  const own = scenario?.summarizer?.();
  let episodes = 0;
  let successes = 0;
  let rewards = 0;
  let turns = 0;
  let failed = 0;
  const byEndReason: Partial<Record<EndReason, number>> = {};
  return {
    add(record) {
      episodes++;
      successes += record.outcome.success ? 1 : 0;
      rewards += record.totalReward;
      turns += record.turns.length;
      if (record.status === 'error') failed++;
      byEndReason[record.endReason] = (byEndReason[record.endReason] ?? 0) + 1;
      own?.add(record);
    },
    result() {
      const mean = (sum: number) => (episodes === 0 ? 0 : sum / episodes);
      return {
        episodes,
        successRate: mean(successes),
        meanReward: mean(rewards),
        meanTurns: mean(turns),
        failed,
        byEndReason: { ...byEndReason },
        ...(own?.result() ?? {}),
      };
    },
  };
}

/** The summary of a set of records in hand (e.g. read back from a run's episodes.jsonl). */
export function summarizeRecords(records: Iterable<EpisodeRecord>, scenario?: Scenario): RolloutSummary {
  const summarizer = rolloutSummarizer(scenario);
  for (const record of records) summarizer.add(record);
  return summarizer.result();
}
