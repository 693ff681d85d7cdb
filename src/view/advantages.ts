import type { EpisodeRecord } from '../core/types.ts';
import { computeAdvantages } from '../rl/advantages.ts';

/**
 * GRPO advantages of the episodes of one group, as the trainer computes them: (r − mean) /
 * (std + 1e-6) over the group's total rewards (unbiased std; a group of one passes its reward
 * through). A record that carries its own advantage (turn info `advantage`) keeps it.
 */
export function groupAdvantages(
  records: readonly Pick<EpisodeRecord, 'totalReward' | 'turns'>[],
): { advantage: number; recorded: boolean }[] {
  const computed = computeAdvantages(
    'grpo',
    records.map((r) => ({ rewards: [r.totalReward], mask: [1], group: 'g' })),
  ).map((a) => a.advantages[0]!);
  return records.map((r, i) => {
    const own = r.turns.at(-1)?.info?.advantage;
    return typeof own === 'number' ? { advantage: own, recorded: true } : { advantage: computed[i]!, recorded: false };
  });
}
