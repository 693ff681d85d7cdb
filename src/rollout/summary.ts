import { SummarizerError } from '../core/errors.ts';
import type { EndReason, EpisodeRecord } from '../core/types.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { type EpisodeDigest, FinishedEpisode } from './finished-episode.ts';

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
 * A run's summary as a fold, in two parts: `digest` takes what the fold needs from a record (where
 * the record is played: a worker thread sends it with the record's line), `add` folds it in.
 */
export interface RolloutSummarizer {
  digest(record: EpisodeRecord): EpisodeDigest;
  /** Folds in a record, or a finished episode with its digest, in episode order. */
  add(episode: EpisodeRecord | FinishedEpisode): void;
  result(): RolloutSummary;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * The scenario-independent metrics plus the scenario's own, folded over records one at a time (in
 * episode order: the sums, and so the means, come out the same to the last bit on every run), so a
 * run's summary never needs the run held in memory. A scenario summarizer with `digest` has it
 * taken with the rest; one without is given the record (parsed from its line, if it came from a
 * worker thread). One that throws makes a SummarizerError.
 */
export function rolloutSummarizer(scenario?: Scenario): RolloutSummarizer {
  const own = scenario?.summarizer?.();
  const failure = (index: number, err: unknown) => new SummarizerError(scenario?.id ?? '?', index, errorText(err));
  let episodes = 0;
  let successes = 0;
  let rewards = 0;
  let turns = 0;
  let failed = 0;
  const byEndReason: Partial<Record<EndReason, number>> = {};
  const digest = (record: EpisodeRecord): EpisodeDigest => {
    let tokens = 0;
    for (const turn of record.turns) tokens += turn.tokens?.length ?? 0;
    const d: EpisodeDigest = {
      index: record.index,
      turns: record.turns.length,
      tokens,
      totalReward: record.totalReward,
      success: record.outcome.success,
      status: record.status,
      endReason: record.endReason,
    };
    if (own?.digest) {
      try {
        d.own = own.digest(record);
      } catch (err) {
        d.ownError = errorText(err);
      }
    }
    return d;
  };
  return {
    digest,
    add(finished) {
      const episode = finished instanceof FinishedEpisode ? finished : FinishedEpisode.of(finished, digest(finished));
      const d = episode.digest;
      episodes++;
      successes += d.success ? 1 : 0;
      rewards += d.totalReward;
      turns += d.turns;
      if (d.status === 'error') failed++;
      byEndReason[d.endReason] = (byEndReason[d.endReason] ?? 0) + 1;
      if (!own) return;
      if (d.ownError !== undefined) throw failure(d.index, d.ownError);
      try {
        own.add(own.digest ? d.own : episode.record);
      } catch (err) {
        throw failure(d.index, err);
      }
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
