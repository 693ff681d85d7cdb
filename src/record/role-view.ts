import type { EpisodeRecord, Message, RoleName, TurnRecord } from '../core/types.ts';
import { extendedBy, stepContext, type ShownContext } from './step-context.ts';

/**
 * An episode as another role lived it: a record of that role's own view, so that everything which
 * reads records (SFT, RL trajectories, the tokenizer's texts) trains the role as it trains the agent.
 * Its prompt is the role's opening messages and the agent's first message to it; each step of its
 * replies is a turn, shown exactly what its policy was shown (the agent's messages as user turns, its
 * own tools' results as tool turns), so the record is step-level. Null when the role never spoke.
 */
export interface RoleViewOptions {
  /** The role's reward for the episode (default: the outcome's, a cooperative role's). */
  reward?(record: EpisodeRecord): number;
  /** The ids of a shown context, in the role's policy's template: given, the view carries them (RL). */
  encode?(messages: readonly Message[]): number[];
}

export function roleView(record: EpisodeRecord, role: RoleName, options: RoleViewOptions = {}): EpisodeRecord | null {
  const played = record.roles?.[role];
  if (!played) return null;
  const view: Message[] = played.prompt.slice();
  const shown: Message[][] = [];
  const turns: TurnRecord[] = [];
  for (const turn of record.turns) {
    if (turn.reply?.role !== role || turn.action.kind !== 'answer') continue;
    // What the role hears: the agent's message (a previous step's observation, when there was one).
    const heard = turn.action.text;
    const previous = turns.at(-1);
    if (previous && previous.observation === null) previous.observation = heard;
    view.push({ content: heard, role: 'user' });
    for (const step of turn.reply.steps) {
      shown.push(view.slice());
      view.push({ content: step.text, role: 'assistant' });
      const said = step.action.kind === 'answer';
      const seen =
        step.action.kind === 'invalid' ? `error: ${step.action.error}` : step.results.map((r) => r.content).join('\n');
      if (!said) view.push({ content: seen, role: 'tool' });
      const t = { action: step.action, done: false, index: turns.length } as TurnRecord;
      if (step.logprobs) t.logprobs = step.logprobs;
      t.observation = said ? null : seen;
      t.results = step.results;
      t.reward = 0;
      t.states = [];
      t.text = step.text;
      t.tokenCount = step.tokens?.length ?? 0;
      if (step.tokens) t.tokens = step.tokens;
      turns.push(t);
    }
  }
  if (turns.length === 0) return null;
  turns.at(-1)!.done = true;
  // Each step's context, stored as a change to what concatenation would have shown (StepContext).
  const contexts: ShownContext[] = shown.map((messages) =>
    options.encode ? { messages, tokens: options.encode(messages) } : { messages },
  );
  let base = contexts[0]!;
  turns.forEach((t, i) => {
    if (i > 0) {
      base = extendedBy(base, turns[i - 1]!);
      t.context = stepContext(base, contexts[i]!);
      base = contexts[i]!;
    }
  });
  const reward = options.reward ? options.reward(record) : record.outcome.reward;
  const said = turns.filter((t) => t.action.kind === 'answer').at(-1);
  const { checksum: _checksum, roles: _roles, ...rest } = record;
  const out: EpisodeRecord = {
    ...rest,
    checksum: '', // a view, never sealed nor written
    episodeId: `${record.episodeId}/${role}`,
    policy: played.policy,
    prompt: contexts[0]!.messages.slice(),
    turns,
    answer: said ? said.text : null,
    outcome: { ...record.outcome, reward },
    processReward: 0,
    totalReward: reward,
    totalTokens: turns.reduce((n, t) => n + t.tokenCount, 0),
  };
  if (contexts[0]!.tokens) out.promptTokens = contexts[0]!.tokens.slice();
  else delete out.promptTokens;
  return out;
}
