import { AgentR1Error } from '../core/errors.ts';
import type { EpisodeRecord, TurnRecord } from '../core/types.ts';
import { isStepLevel, shownContexts } from '../record/step-context.ts';
import type { PolicyEncoding } from './policy.ts';

/**
 * A record as token ids, the one conversion the trainers share (SFT and RL): the whole history
 * `[prompt][action 1][obs 1]…` with the loss mask on the agent's own tokens.
 */
export class TrajectoryError extends AgentR1Error {}

/**
 * A text-only record (`policy.textOnly`: a teacher's answers, recorded through `serve --policy
 * openai:URL`) given to RL. Its text was not sampled by our model, so a policy gradient on it (with
 * our log-probs on ids re-encoded from that text) would be wrong: RL refuses it, and the batch with
 * it, rather than skip it quietly. Such records are SFT data (sequencesFromRecords reads their text).
 */
export class TextOnlyRecordError extends TrajectoryError {
  constructor(
    readonly episodeId: string,
    readonly policyId: string,
  ) {
    super(
      `episode ${episodeId} is a text-only record (answered by ${policyId}, a teacher whose token ids are not ours): ` +
        'it is SFT data (agent-r1 sft, sequencesFromRecords), never RL data',
    );
  }
}

export interface TokenSequence {
  tokens: number[];
  /** 1 on action tokens (the policy's own), 0 on prompt and observation tokens. */
  mask: number[];
}

/** One episode as the RL trainer sees it: its tokens, and the rewards placed on them. */
export interface TrainingSequence extends TokenSequence {
  episodeId: string;
  /** GRPO/RLOO group key. */
  group: string;
  sample: number;
  /** Each turn's process reward on its action's last token, plus the outcome on the last action token. */
  rewards: number[];
  /** The sampler's log-probs on action tokens (0 elsewhere), as recorded at generation time. */
  sampleLogprobs: number[];
  promptLength: number;
  totalReward: number;
  success: boolean;
  metrics: { [key: string]: number };
  policyVersion: string;
  /**
   * Step-level samples only (one per step of an episode, which share `episodeId`): the step's index.
   * The prompt is what the ToolEnv showed at that step; advantages are computed per episode.
   */
  step?: number;
}

export interface RecordTokensOptions {
  /**
   * Encode the record's texts with this encoding instead of taking the recorded token ids (records
   * of scripted policies have text only; ids from another tokenizer do not fit), as live play
   * builds the history: prompt, each action, its observation in the chat template, and the
   * encoding's end tokens after a last action without observation. Without one, the record must
   * carry ids (a tokenizing policy's record), used as recorded.
   */
  encoding?: PolicyEncoding & { action(text: string): number[] };
  /** With an encoding: still take the recorded ids where the record has them. */
  useRecordTokens?: boolean;
}

export interface RecordTokens extends TokenSequence {
  /** Each turn's action tokens, [start, end) in `tokens`. */
  actions: { start: number; end: number }[];
}

const noPromptIds = (id: string) =>
  `episode ${id} has no prompt token ids: RL needs a policy that tokenizes (a checkpoint policy)`;

/** The record's history as token ids with the action mask (see RecordTokensOptions for where the ids come from). */
export function recordTokens(record: EpisodeRecord, options: RecordTokensOptions = {}): RecordTokens {
  const enc = options.encoding;
  const ids = !enc || (options.useRecordTokens ?? false);
  const id = record.episodeId;
  if (!enc) refuseTextOnly(record);
  let tokens: number[];
  if (ids && record.promptTokens) tokens = record.promptTokens.slice();
  else if (enc) tokens = enc.prompt(record.prompt);
  else throw new TrajectoryError(noPromptIds(id));
  const mask: number[] = tokens.map(() => 0);
  const push = (part: readonly number[], m: number) => {
    for (const t of part) {
      tokens.push(t);
      mask.push(m);
    }
  };
  const action = (turn: TurnRecord): readonly number[] => {
    if (ids && turn.tokens) return turn.tokens;
    if (enc) return enc.action(turn.text);
    throw new TrajectoryError(`episode ${id} turn ${turn.index} has no token ids: RL needs a policy that tokenizes`);
  };
  const observation = (turn: TurnRecord, last: boolean, actionIds: readonly number[]): readonly number[] => {
    if (!enc) return turn.observationTokens ?? [];
    if (turn.observation === null) return last && enc.end ? enc.end() : [];
    return ids && turn.observationTokens
      ? turn.observationTokens
      : enc.observation(turn.observation, actionIds, turn.reply ? 'user' : 'tool');
  };
  const actions = record.turns.map((turn, i) => {
    const start = tokens.length;
    const actionIds = action(turn);
    push(actionIds, 1);
    const end = tokens.length;
    push(observation(turn, i === record.turns.length - 1, actionIds), 0);
    return { start, end };
  });
  return { tokens, mask, actions };
}

/**
 * A record as one token sequence per step (the step-level MDP): what the step was shown, then its
 * action, with the mask on the action only. For a concatenating record, step t's prompt is the
 * history before action t, so these are the paper's sequence cut at each action.
 */
export function recordStepTokens(record: EpisodeRecord, options: RecordTokensOptions = {}): RecordTokens[] {
  const enc = options.encoding;
  const ids = !enc || (options.useRecordTokens ?? false);
  const id = record.episodeId;
  if (!enc) refuseTextOnly(record);
  const shown = shownContexts(record);
  return record.turns.map((turn, i) => {
    const context = shown[i]!;
    let prompt: readonly number[];
    if (ids && context.tokens) prompt = context.tokens;
    else if (enc) prompt = enc.prompt(context.messages);
    else throw new TrajectoryError(noPromptIds(id));
    let action: readonly number[];
    if (ids && turn.tokens) action = turn.tokens;
    else if (enc) action = enc.action(turn.text);
    else
      throw new TrajectoryError(`episode ${id} turn ${turn.index} has no token ids: RL needs a policy that tokenizes`);
    const start = prompt.length;
    return {
      tokens: [...prompt, ...action],
      mask: [...prompt.map(() => 0), ...action.map(() => 1)],
      actions: [{ start, end: start + action.length }],
    };
  });
}

/** Without an encoding the ids are the record's own: a text-only record has none that are ours. */
function refuseTextOnly(record: EpisodeRecord): void {
  if (record.policy?.textOnly) throw new TextOnlyRecordError(record.episodeId, record.policy.id);
}

function checkTrainable(record: EpisodeRecord): asserts record is EpisodeRecord & { promptTokens: number[] } {
  if (record === null || typeof record !== 'object') throw new TrajectoryError('record is not an object');
  refuseTextOnly(record);
  const id = record.episodeId;
  if (record.status !== 'ok') {
    throw new TrajectoryError(`episode ${id} failed (${record.error ?? 'status error'}); it has no trajectory`);
  }
  if (!Array.isArray(record.promptTokens)) {
    throw new TrajectoryError(noPromptIds(id));
  }
  if (!Array.isArray(record.turns)) throw new TrajectoryError(`episode ${id} has no turns array`);
  for (const turn of record.turns) {
    if (!Array.isArray(turn.tokens)) {
      throw new TrajectoryError(`episode ${id} turn ${turn.index} has no token ids: RL needs a policy that tokenizes`);
    }
    if (turn.logprobs !== undefined && turn.logprobs.length !== turn.tokens.length) {
      const [logprobs, tokens] = [turn.logprobs.length, turn.tokens.length];
      throw new TrajectoryError(`episode ${id} turn ${turn.index}: ${logprobs} log-probs for ${tokens} tokens`);
    }
    if (!Number.isFinite(turn.reward)) {
      throw new TrajectoryError(`episode ${id} turn ${turn.index}: reward is not a finite number`);
    }
  }
  const outcome = record.outcome?.reward;
  if (typeof outcome !== 'number' || !Number.isFinite(outcome)) {
    throw new TrajectoryError(`episode ${id}: outcome reward is not a finite number`);
  }
}

/**
 * Turns one finished episode record, with its token ids, into a training sequence (the paper's
 * form: the whole history, the loss on every action). Throws a TrajectoryError on a record it
 * cannot use.
 */
export function buildTrajectory(record: EpisodeRecord): TrainingSequence {
  checkTrainable(record);
  const id = record.episodeId;
  const { tokens, mask, actions } = recordTokens(record);
  const rewards: number[] = new Array(tokens.length).fill(0);
  const sampleLogprobs: number[] = new Array(tokens.length).fill(0);
  let lastAction = -1;
  // A turn with no tokens has nowhere to put its reward: it goes to the previous action token, or,
  // before any action, to the next one.
  let pending = 0;
  record.turns.forEach((turn, i) => {
    const { start, end } = actions[i]!;
    for (let k = 0; k < end - start; k++) sampleLogprobs[start + k] = turn.logprobs?.[k] ?? 0;
    if (end > start) {
      lastAction = end - 1;
      rewards[lastAction]! += turn.reward + pending;
      pending = 0;
    } else if (lastAction >= 0) {
      rewards[lastAction]! += turn.reward;
    } else {
      pending += turn.reward;
    }
  });
  if (lastAction < 0) throw new TrajectoryError(`episode ${id} has no action tokens to train on`);
  rewards[lastAction]! += record.outcome.reward + pending;
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

/**
 * One training sample per step (the step-level MDP): the step's prompt ids, its action ids with the
 * mask and the sampler's log-probs on them, its process reward on its last action token and, on the
 * last step, the outcome. A step without action tokens is no sample: its reward goes to the step
 * before (or, before any, the next). Works on any record; for a concatenating one the samples are
 * the paper's sequence cut at each action, with the same rewards on the same tokens.
 */
export function buildStepTrajectories(record: EpisodeRecord): TrainingSequence[] {
  checkTrainable(record);
  const id = record.episodeId;
  const steps = recordStepTokens(record);
  const out: TrainingSequence[] = [];
  let pending = 0;
  record.turns.forEach((turn, i) => {
    const { tokens, mask, actions } = steps[i]!;
    const { start, end } = actions[0]!;
    if (end === start) {
      if (out.length > 0) addReward(out.at(-1)!, turn.reward);
      else pending += turn.reward;
      return;
    }
    const rewards: number[] = new Array(tokens.length).fill(0);
    rewards[end - 1] = turn.reward + pending;
    pending = 0;
    const sampleLogprobs: number[] = new Array(tokens.length).fill(0);
    for (let k = 0; k < end - start; k++) sampleLogprobs[start + k] = turn.logprobs?.[k] ?? 0;
    out.push({
      episodeId: id,
      group: record.group,
      sample: record.sample,
      step: turn.index,
      tokens,
      mask,
      rewards,
      sampleLogprobs,
      promptLength: start,
      totalReward: record.totalReward,
      success: record.outcome.success,
      metrics: record.outcome.metrics ?? {},
      policyVersion: record.policy?.version ?? '',
    });
  });
  if (out.length === 0) throw new TrajectoryError(`episode ${id} has no action tokens to train on`);
  addReward(out.at(-1)!, record.outcome.reward + pending);
  return out;
}

/** Adds a reward on a sample's last action token. */
function addReward(seq: TrainingSequence, reward: number): void {
  seq.rewards[seq.mask.lastIndexOf(1)]! += reward;
}

/**
 * What a minibatch counts and keeps together: each sequence of the paper's form, or each episode's
 * steps (in step order) of the step-level form, so that `minibatch` means episodes either way and
 * the steps of an episode are updated on together, as its one sequence would be.
 */
export function trainingUnits(seqs: readonly TrainingSequence[]): number[][] {
  const units: number[][] = [];
  const byEpisode = new Map<string, number[]>();
  seqs.forEach((s, i) => {
    if (s.step === undefined) return units.push([i]);
    const unit = byEpisode.get(s.episodeId);
    if (unit) unit.push(i);
    else {
      const fresh = [i];
      byEpisode.set(s.episodeId, fresh);
      units.push(fresh);
    }
  });
  return units;
}

export interface SkippedEpisode {
  episodeId: string;
  reason: string;
}

/**
 * Builds the trajectories of a rollout batch. Episodes that failed or cannot be used are skipped
 * with their reason, so one bad rollout never stops a training step; a text-only record (a teacher's) is
 * refused with a TextOnlyRecordError.
 */
export function buildTrajectories(records: readonly EpisodeRecord[]): {
  sequences: TrainingSequence[];
  skipped: SkippedEpisode[];
} {
  const sequences: TrainingSequence[] = [];
  const skipped: SkippedEpisode[] = [];
  // One form per batch: a step-level batch trains every episode as steps (one that concatenated,
  // such as a one-turn episode of a ToolEnv's own hook, is the special case).
  const steps = records.some((r) => r && typeof r === 'object' && Array.isArray(r.turns) && isStepLevel(r));
  for (const record of records) {
    try {
      sequences.push(...(steps ? buildStepTrajectories(record) : [buildTrajectory(record)]));
    } catch (error) {
      // A text-only record in an RL batch is a mistake of the run's, not a bad rollout: refused.
      if (!(error instanceof TrajectoryError) || error instanceof TextOnlyRecordError) throw error;
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
