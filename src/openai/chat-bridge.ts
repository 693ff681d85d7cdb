import { LRUCache } from 'lru-cache';
import { canonicalJson } from '../core/canonical-json.ts';
import type { Message } from '../core/types.ts';
import type { PolicyEncoding } from '../policy/policy.ts';
import { OpenAIHttpError } from './errors.ts';
import { assistantToAction, joinToolResults } from './messages.ts';
import type { AssistantMessage, OpenAIMessage } from './wire.ts';

/** The chat template of a token policy, plus how it encodes an action's text. */
export type ChatTemplate = PolicyEncoding & { action(text: string): number[] };

/**
 * Reads an OpenAI conversation into the token ids of the template the policy was trained with:
 *
 *   leading system/user messages  → template.prompt (ends with the assistant header)
 *   each assistant message        → its action tokens
 *   what follows it, up to the next assistant message (tool results, user messages)
 *                                 → one observation (template.observation), as in an episode
 *
 * An assistant message this server generated is put back as the exact token ids it sampled (kept in
 * a bounded cache keyed by the message), never re-encoded from text: BPE round trips are not
 * bijective, and a policy must see the history it produced. Other assistant messages are encoded as
 * Hermes text. The template has no tools section: the policy learned its tools from the system
 * prompt it was trained with, so the request's `tools` are not rendered.
 */
export class ChatBridge {
  private readonly actions: LRUCache<string, number[]>;

  constructor(
    private readonly template: ChatTemplate,
    cacheEntries = 10_000,
  ) {
    this.actions = new LRUCache({ max: cacheEntries });
  }

  /** Remembers the token ids behind a message this server returned. */
  remember(message: AssistantMessage, tokens: readonly number[]): void {
    this.actions.set(key(message), [...tokens]);
  }

  /**
   * The conversation's token ids; past `limit` tokens it stops early (the caller refuses it). An
   * assistant message's ids are `given`'s for its index when given, else the remembered ones.
   */
  render(
    messages: readonly OpenAIMessage[],
    limit = Infinity,
    given?: (index: number) => readonly number[] | undefined,
  ): number[] {
    let first = messages.findIndex((m) => m.role === 'assistant');
    if (first < 0) first = messages.length;
    const prompt: Message[] = messages.slice(0, first).map((m) => ({ role: m.role, content: m.content ?? '' }));
    const tokens = this.template.prompt(prompt);
    let i = first;
    while (i < messages.length && tokens.length <= limit) {
      const assistant = messages[i] as AssistantMessage;
      const ids = given ? given(i) : this.actions.get(key(assistant));
      // In a loop, not push(...ids): a long turn as arguments would overflow the stack.
      for (const id of ids ?? this.template.action(assistantToAction(assistant))) tokens.push(id);
      const after: OpenAIMessage[] = [];
      for (i++; i < messages.length && messages[i]!.role !== 'assistant'; i++) after.push(messages[i]!);
      if (after.length === 0) {
        const where = i < messages.length ? 'is followed by another assistant message' : 'is the last message';
        throw new OpenAIHttpError(
          400,
          `messages: an assistant message ${where}; this policy's chat template needs a tool result or user message after each assistant turn`,
          'invalid_request_error',
          'invalid_conversation',
          'messages',
        );
      }
      for (const id of this.template.observation(observationText(after, assistant))) tokens.push(id);
    }
    return tokens;
  }
}

function key(message: AssistantMessage): string {
  const content = message.content === null || message.content === '' ? null : message.content;
  return canonicalJson({ content, tool_calls: message.tool_calls ?? [] });
}

/** The observation that the messages after an assistant turn make: tool results joined as in an episode. */
export function observationText(after: readonly OpenAIMessage[], assistant: AssistantMessage): string {
  if (after.every((m) => m.role === 'tool')) {
    const names = new Map((assistant.tool_calls ?? []).map((c) => [c.id, c.function.name]));
    return joinToolResults(
      after.map((m) => ({
        name: names.get((m as { tool_call_id: string }).tool_call_id) ?? 'tool',
        content: m.content ?? '',
      })),
    );
  }
  return after.map((m) => m.content ?? '').join('\n');
}
