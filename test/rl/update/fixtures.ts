import type { TrainingSequence } from '../../../src/policy/trajectory.ts';
import { ANS, BOS, OBS, PEEK } from '../toy.ts';

/** A training sequence of the toy scenario with its reward on the last action token. */
export const seq = (tokens: number[], mask: number[], reward: number, group: string): TrainingSequence => {
  const rewards = tokens.map(() => 0);
  rewards[mask.lastIndexOf(1)] = reward;
  return {
    episodeId: group + reward,
    group,
    sample: 0,
    tokens,
    mask,
    rewards,
    sampleLogprobs: tokens.map(() => 0),
    promptLength: 1,
    totalReward: reward,
    success: reward > 0,
    metrics: {},
    policyVersion: '',
  };
};

/** Two groups of two: a winner and a loser each. */
export const batch = [
  seq([BOS, PEEK, OBS[2]!, ANS[2]!], [0, 1, 0, 1], 1, 'a'),
  seq([BOS, ANS[0]!], [0, 1], 0, 'a'),
  seq([BOS, PEEK, OBS[1]!, ANS[3]!], [0, 1, 0, 1], 0, 'b'),
  seq([BOS, PEEK, OBS[1]!, ANS[1]!], [0, 1, 0, 1], 1, 'b'),
];
