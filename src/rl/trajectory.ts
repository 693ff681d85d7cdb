import type { EpisodeRecord } from '../core/types.ts';
import { RlInputError } from './errors.ts';

/**
 * One episode as the trainer sees it: the whole history as token ids, `[prompt][action 1][obs 1]…`,
 * with the loss mask on the agent's own tokens and the rewards placed on tokens.
 */
export interface TrainingSequence {
  episodeId: string;
  /** GRPO/RLOO group key. */
  group: string;
  sample: number;
  tokens: number[];
  /** 1 on action tokens (the policy's own), 0 on prompt and observation tokens. */
  mask: number[];
  /** Each turn's process reward on its action's last token, plus the outcome on the last action token. */
  rewards: number[];
  /** The sampler's log-probs on action tokens (0 elsewhere), as recorded at generation time. */
  sampleLogprobs: number[];
  promptLength: number;
  totalReward: number;
  success: boolean;
  metrics: { [key: string]: number };
  policyVersion: string;
}

/** Turns one finished episode record into a training sequence. Throws on a record it cannot use. */
export function buildTrajectory(record: EpisodeRecord): TrainingSequence {
  if (record === null || typeof record !== 'object') throw new RlInputError('record is not an object');
  const id = record.episodeId;
  if (record.status !== 'ok') throw new RlInputError(`episode ${id} failed (${record.error ?? 'status error'}); it has no trajectory`);
  if (!Array.isArray(record.promptTokens)) {
    throw new RlInputError(`episode ${id} has no prompt token ids: RL needs a policy that tokenizes (a checkpoint policy)`);
  }
  if (!Array.isArray(record.turns)) throw new RlInputError(`episode ${id} has no turns array`);
  const tokens: number[] = [...record.promptTokens];
  const mask: number[] = new Array(tokens.length).fill(0);
  const rewards: number[] = new Array(tokens.length).fill(0);
  const sampleLogprobs: number[] = new Array(tokens.length).fill(0);
  let lastAction = -1;
  // A turn with no tokens has nowhere to put its reward: it goes to the previous action token, or,
  // before any action, to the next one.
  let pending = 0;
  for (const turn of record.turns) {
    if (!Array.isArray(turn.tokens)) {
      throw new RlInputError(`episode ${id} turn ${turn.index} has no token ids: RL needs a policy that tokenizes`);
    }
    if (turn.logprobs !== undefined && turn.logprobs.length !== turn.tokens.length) {
      throw new RlInputError(
        `episode ${id} turn ${turn.index}: ${turn.logprobs.length} log-probs for ${turn.tokens.length} tokens`,
      );
    }
    if (!Number.isFinite(turn.reward)) throw new RlInputError(`episode ${id} turn ${turn.index}: reward is not a finite number`);
    turn.tokens.forEach((tok, k) => {
      tokens.push(tok);
      mask.push(1);
      rewards.push(0);
      sampleLogprobs.push(turn.logprobs?.[k] ?? 0);
    });
    if (turn.tokens.length > 0) {
      lastAction = tokens.length - 1;
      rewards[lastAction]! += turn.reward + pending;
      pending = 0;
    } else if (lastAction >= 0) {
      rewards[lastAction]! += turn.reward;
    } else {
      pending += turn.reward;
    }
    for (const tok of turn.observationTokens ?? []) {
      tokens.push(tok);
      mask.push(0);
      rewards.push(0);
      sampleLogprobs.push(0);
    }
  }
  if (lastAction < 0) throw new RlInputError(`episode ${id} has no action tokens to train on`);
  const outcome = record.outcome?.reward;
  if (typeof outcome !== 'number' || !Number.isFinite(outcome)) {
    throw new RlInputError(`episode ${id}: outcome reward is not a finite number`);
  }
  rewards[lastAction]! += outcome + pending;
  return {
    episodeId: id,
    group: record.group,
    sample: record.sample,
    tokens,
    mask,
    rewards,
    sampleLogprobs,
    promptLength: record.promptTokens.length,
    totalReward: record.totalReward,
    success: record.outcome.success,
    metrics: record.outcome.metrics ?? {},
    policyVersion: record.policy?.version ?? '',
  };
}

export interface SkippedEpisode {
  episodeId: string;
  reason: string;
}

/**
 * Builds the trajectories of a rollout batch. Episodes that failed or cannot be used are skipped
 * with their reason, so one bad rollout never stops a training step.
 */
export function buildTrajectories(records: readonly EpisodeRecord[]): { sequences: TrainingSequence[]; skipped: SkippedEpisode[] } {
  const sequences: TrainingSequence[] = [];
  const skipped: SkippedEpisode[] = [];
  for (const record of records) {
    try {
      sequences.push(buildTrajectory(record));
    } catch (error) {
      if (!(error instanceof RlInputError)) throw error;
      skipped.push({ episodeId: String(record?.episodeId), reason: error.message });
    }
  }
  return { sequences, skipped };
}

/**
 * Cuts a sequence to the model's context. Generation never feeds more than the context, so every
 * action token the model really chose lies within it (the history can run past it only with
 * observation tokens, or an action the budget refused). Rewards beyond the cut move to the last
 * action token inside it, so the episode's return is kept. Null when no action token fits.
 */
export function fitToContext(seq: TrainingSequence, maxLength: number): TrainingSequence | null {
  if (seq.tokens.length <= maxLength) return seq;
  const last = seq.mask.lastIndexOf(1, maxLength - 1);
  if (last < 0) return null;
  const rewards = seq.rewards.slice(0, maxLength);
  rewards[last]! += seq.rewards.slice(maxLength).reduce((a, b) => a + b, 0);
  return {
    ...seq,
    tokens: seq.tokens.slice(0, maxLength),
    mask: seq.mask.slice(0, maxLength),
    rewards,
    sampleLogprobs: seq.sampleLogprobs.slice(0, maxLength),
  };
}
