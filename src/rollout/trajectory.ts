import type { EpisodeRecord } from '../core/types.ts';
import type { Trajectory } from './protocol.ts';

/**
 * An episode's token-level view as typed arrays, for records of policies that tokenize
 * (undefined otherwise): `[prompt][action 1][observation 1]…`, mask 1 on action tokens, each turn's
 * process reward on its action's last token and the outcome on the last action token.
 */
export function toTrajectory(record: EpisodeRecord): Trajectory | undefined {
  if (!record.promptTokens || record.turns.some((t) => !t.tokens)) return undefined;
  const length = record.promptTokens.length + record.turns.reduce((n, t) => n + t.tokens!.length + (t.observationTokens?.length ?? 0), 0);
  const tokens = new Int32Array(length);
  const mask = new Uint8Array(length);
  const logprobs = new Float32Array(length);
  const rewards = new Float32Array(length);
  tokens.set(record.promptTokens, 0);
  let at = record.promptTokens.length;
  let lastAction = -1;
  for (const turn of record.turns) {
    const action = turn.tokens!;
    tokens.set(action, at);
    mask.fill(1, at, at + action.length);
    if (turn.logprobs) logprobs.set(turn.logprobs, at);
    if (action.length > 0) lastAction = at + action.length - 1;
    if (lastAction >= 0) rewards[lastAction] += turn.reward;
    at += action.length;
    if (turn.observationTokens) {
      tokens.set(turn.observationTokens, at);
      at += turn.observationTokens.length;
    }
  }
  if (lastAction >= 0) rewards[lastAction] += record.outcome.reward;
  return { episodeId: record.episodeId, tokens, mask, logprobs, rewards };
}
