import type { EndReason, EpisodeRecord } from '../core/types.ts';
import type { Scenario } from '../scenario/scenario.ts';

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

const mean = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/** The scenario-independent metrics of a set of records, plus the scenario's own. */
export function summarizeRecords(records: readonly EpisodeRecord[], scenario?: Scenario): RolloutSummary {
  const byEndReason: Partial<Record<EndReason, number>> = {};
  for (const r of records) byEndReason[r.endReason] = (byEndReason[r.endReason] ?? 0) + 1;
  return {
    episodes: records.length,
    successRate: mean(records.map((r) => (r.outcome.success ? 1 : 0))),
    meanReward: mean(records.map((r) => r.totalReward)),
    meanTurns: mean(records.map((r) => r.turns.length)),
    failed: records.filter((r) => r.status === 'error').length,
    byEndReason,
    ...(scenario?.summarize?.(records) ?? {}),
  };
}
