import type { Message } from '../../core/types.ts';
import { ChatTemplateError, TemplateBudgetError } from '../../hf/errors.ts';
import type { ChatTemplate, TemplateMessage, TemplateTool } from '../../hf/chat-template.ts';
import type { HfTokenizer } from '../../hf/tokenizer.ts';
import type { OpenAITool } from '../../tools/tool.ts';
import type { PolicyEncoding } from '../policy.ts';

/** Stands for an assistant turn's content, to find where the template writes what follows it. */
const SENTINEL = 'AGENTR1SENTINEL';

/**
 * A Hugging Face model's chat template as token ids, the history never re-tokenized:
 *
 *   prompt       tokenize(render(messages, tools, add_generation_prompt))
 *   action       the ids as sampled (the model's own end-of-turn token included)
 *   observation  the ids of the text the template writes between that assistant turn and the next
 *                generation prompt (the end of the turn, when the sampled ids did not end it; the
 *                tool message; the assistant's opening)
 *
 * so that, wherever the sampled ids are what their text encodes to, an episode's ids equal
 * tokenize(render(the messages so far)). Tool results go in as a `tool` message; a template that
 * refuses that role gets them as a `user` message.
 */
export class HfChatEncoding implements PolicyEncoding {
  /** The token the template ends an assistant turn with (the model generates it), when it is one. */
  readonly turnEnd: number | null;
  private readonly eos: ReadonlySet<number>;

  constructor(
    readonly tokenizer: HfTokenizer,
    readonly template: ChatTemplate,
    eosTokenIds: readonly number[],
  ) {
    this.eos = new Set(eosTokenIds);
    const first = this.tokenizer.encode(this.tail('x'))[0];
    this.turnEnd = first !== undefined && this.eos.has(first) ? first : null;
  }

  prompt(messages: readonly Message[], tools?: readonly OpenAITool[]): number[] {
    return this.tokenizer.encode(this.render(messages, tools));
  }

  /** The rendered prompt, as text. */
  render(messages: readonly TemplateMessage[], tools?: readonly TemplateTool[]): string {
    return this.template.render({ messages, tools, addGenerationPrompt: true });
  }

  observation(text: string, action?: readonly number[], role: 'tool' | 'user' = 'tool'): number[] {
    // When the sampled ids already end the turn, what the template writes after it starts past that token.
    return this.encodePiece(this.tail(text, role), action);
  }

  /**
   * A conversation's ids in which some assistant turns are given as the ids sampled for them: the
   * template renders the rest (tools, the other turns, the generation prompt), each such turn is put
   * in as its ids, never re-tokenized from its text. Stops early once past `limit` ids.
   */
  conversation(
    messages: readonly TemplateMessage[],
    tools: readonly TemplateTool[] | undefined,
    sampled: (index: number) => readonly number[] | undefined,
    limit = Infinity,
  ): number[] {
    const given = messages.map((m, i) => (m.role === 'assistant' ? sampled(i) : undefined));
    const marks = messages.map((_, i) => `${SENTINEL}${i}Z`);
    const text = this.render(
      messages.map((m, i) => (given[i] ? { role: 'assistant', content: marks[i]! } : m)),
      tools,
    );
    const ids: number[] = [];
    let at = 0;
    let after: readonly number[] | undefined;
    for (const [i, ids_] of given.entries()) {
      if (!ids_) continue;
      const where = text.indexOf(marks[i]!, at);
      if (where < 0) throw new ChatTemplateError(this.template.file, "does not write an assistant turn's content");
      append(ids, this.encodePiece(text.slice(at, where), after));
      if (ids.length > limit) return ids;
      append(ids, ids_);
      at = where + marks[i]!.length;
      after = ids_;
    }
    append(ids, this.encodePiece(text.slice(at), after));
    return ids;
  }

  /** Text the template writes after an assistant turn given as ids: less the end of turn those ids hold. */
  private encodePiece(text: string, after: readonly number[] | undefined): number[] {
    const last = after?.at(-1);
    if (last !== undefined && last === this.turnEnd) {
      const end = this.tokenizer.decode([last]);
      if (text.startsWith(end)) return this.tokenizer.encode(text.slice(end.length));
    }
    return this.tokenizer.encode(text);
  }

  /** This encoding with `tools` always rendered in the prompt (records of demonstrations do not carry them). */
  withTools(tools: readonly OpenAITool[]): PolicyEncoding & { action(text: string): number[] } {
    return {
      prompt: (messages) => this.prompt(messages, tools),
      observation: (text, action, role) => this.observation(text, action, role),
      action: (text) => this.action(text),
    };
  }

  /** An action's text as the model would have written it: its ids, then the end of its turn. */
  action(text: string): number[] {
    const ids = this.tokenizer.encode(text);
    return this.turnEnd === null ? ids : [...ids, this.turnEnd];
  }

  /** The text the template writes after an assistant turn's content, up to the next generation prompt. */
  private tail(observation: string, role: 'tool' | 'user' = 'tool'): string {
    const turn: TemplateMessage[] = [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: SENTINEL },
    ];
    let text: string;
    try {
      text = this.template.render({
        messages: [...turn, { role, content: observation }],
        addGenerationPrompt: true,
      });
    } catch (error) {
      // A template out of budget would be so again with a user message: only a refusal is retried.
      if (!(error instanceof ChatTemplateError) || error instanceof TemplateBudgetError) throw error;
      text = this.template.render({
        messages: [...turn, { role: 'user', content: observation }],
        addGenerationPrompt: true,
      });
    }
    const at = text.lastIndexOf(SENTINEL);
    if (at < 0) throw new ChatTemplateError(this.template.file, "does not write an assistant turn's content");
    return text.slice(at + SENTINEL.length);
  }
}

/** Appends in a loop: `push(...ids)` passes each id as an argument, and a long prompt overflows the stack. */
function append(to: number[], ids: readonly number[]): void {
  for (const id of ids) to.push(id);
}
