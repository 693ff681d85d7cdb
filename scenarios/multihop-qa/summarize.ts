import type { EpisodeRecord } from 'agent-r1-ts';

export type QaTypeStats = {
  n: number;
  em: number;
  f1: number;
  /** Mean share of the gold supporting documents retrieved (search quality, apart from reading). */
  recall: number;
  /** Mean turns per episode (short names: the CLI prints these as columns). */
  turns: number;
  /** Mean total reward per episode. */
  reward: number;
};

export type QaSummary = {
  em: number;
  f1: number;
  recall: number;
  byType: { [type: string]: QaTypeStats };
};

function stats(records: readonly EpisodeRecord[]): QaTypeStats {
  const n = records.length;
  const mean = (f: (r: EpisodeRecord) => number) => (n === 0 ? 0 : records.reduce((a, r) => a + f(r), 0) / n);
  return {
    n,
    em: mean((r) => r.outcome.metrics?.em ?? 0),
    f1: mean((r) => r.outcome.metrics?.f1 ?? 0),
    recall: mean((r) => r.outcome.metrics?.recall ?? 0),
    turns: mean((r) => r.turns.length),
    reward: mean((r) => r.totalReward),
  };
}

/** EM, F1 and gold-document recall over all records and per question type (records without a type count as "other"). */
export function summarizeQa(records: readonly EpisodeRecord[]): QaSummary {
  const groups = new Map<string, EpisodeRecord[]>();
  for (const r of records) {
    const type = r.task.type ?? 'other';
    if (!groups.has(type)) groups.set(type, []);
    groups.get(type)!.push(r);
  }
  const byType: { [type: string]: QaTypeStats } = {};
  for (const type of [...groups.keys()].sort()) byType[type] = stats(groups.get(type)!);
  const all = stats(records);
  return { em: all.em, f1: all.f1, recall: all.recall, byType };
}
