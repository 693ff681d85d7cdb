import type { EpisodeRecord } from '../core/types.ts';
import type { ChatFormat } from '../openai/chat-format.ts';
import type { TemplateTool } from '../hf/chat-template.ts';
import type { AssistantMessage } from '../openai/wire.ts';
import type { TokenSequence } from '../policy/trajectory.ts';
import { matchAnswers, recordedRequests } from './agent-record.ts';

/** How the model being trained writes an answer's text as ids (its own end of turn included). */
export type ActionIds = (text: string) => number[];

/**
 * An agent's recorded episodes (the gateway's: a demonstrator's, a teacher's or a model's) as SFT
 * sequences for another token model: each turn's request rendered with that model's chat format,
 * the earlier answers put in as the ids it would have sampled for their text (what it sees when it
 * plays the agent itself: its own ids, never a re-rendering), then the answer's ids, with the loss on
 * the answers alone. A turn whose prompt extends the previous prompt and answer continues the same
 * sequence (an agent that appends to its history: one sequence per episode); one that rewrites its
 * history starts another (what that step was shown).
 *
 * The answers' text is taken as written (Hermes `<tool_call>` text for a demonstrator's and a
 * teacher's): right for models whose tool-call syntax it is.
 */
export function agentSequences(
  records: readonly EpisodeRecord[],
  format: Pick<ChatFormat, 'prompt'>,
  actionIds: ActionIds,
): TokenSequence[] {
  const out: TokenSequence[] = [];
  for (const record of records) {
    const requests = recordedRequests(record);
    // The k-th entry is turn k's answer (undefined: a turn with none), as matchAnswers pairs them.
    const answers: ({ message: AssistantMessage; tokens: number[] } | undefined)[] = [];
    let current: TokenSequence | null = null;
    record.turns.forEach((turn, k) => {
      const request = requests[k]!;
      const { given } = matchAnswers(request.messages, answers);
      const prompt = format.prompt(
        request.messages,
        (request.tools ?? []) as unknown as TemplateTool[],
        Infinity,
        (i) => given.get(i),
      );
      const action = actionIds(turn.text);
      const message = (turn.info?.response as { message?: AssistantMessage } | undefined)?.message;
      answers.push(message ? { message, tokens: action } : undefined);
      if (current && startsWith(prompt, current.tokens)) {
        const added = prompt.slice(current.tokens.length);
        current.tokens.push(...added, ...action);
        current.mask.push(...added.map(() => 0), ...action.map(() => 1));
      } else {
        current = { tokens: [...prompt, ...action], mask: [...prompt.map(() => 0), ...action.map(() => 1)] };
        out.push(current);
      }
    });
  }
  return out;
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}
