import type { EpisodeRecord, Summarizer } from 'agent-r1-ts';

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

/** What the summary takes from one record (taken where the record is played: see Summarizer.digest). */
export type QaDigest = { type: string; em: number; f1: number; recall: number; turns: number; reward: number };

/** Running sums of one group of records. */
class QaSums {
  n = 0;
  em = 0;
  f1 = 0;
  recall = 0;
  turns = 0;
  reward = 0;

  add(d: QaDigest): void {
    this.n++;
    this.em += d.em;
    this.f1 += d.f1;
    this.recall += d.recall;
    this.turns += d.turns;
    this.reward += d.reward;
  }

  stats(): QaTypeStats {
    const mean = (sum: number) => (this.n === 0 ? 0 : sum / this.n);
    const { n, em, f1, recall, turns, reward } = this;
    return { n, em: mean(em), f1: mean(f1), recall: mean(recall), turns: mean(turns), reward: mean(reward) };
  }
}

/** EM, F1 and gold-document recall over all records and per question type (records without a type count as "other"). */
export function qaSummarizer(): Summarizer<QaSummary, QaDigest> {
  const all = new QaSums();
  const byType = new Map<string, QaSums>();
  return {
    digest: (record: EpisodeRecord): QaDigest => ({
      type: record.task.type ?? 'other',
      em: record.outcome.metrics?.em ?? 0,
      f1: record.outcome.metrics?.f1 ?? 0,
      recall: record.outcome.metrics?.recall ?? 0,
      turns: record.turns.length,
      reward: record.totalReward,
    }),
    add(d) {
      all.add(d);
      let sums = byType.get(d.type);
      if (!sums) byType.set(d.type, (sums = new QaSums()));
      sums.add(d);
    },
    result() {
      const types: { [type: string]: QaTypeStats } = {};
      for (const type of [...byType.keys()].sort()) types[type] = byType.get(type)!.stats();
      const { em, f1, recall } = all.stats();
      return { em, f1, recall, byType: types };
    },
  };
}
