import type { Message } from '../../core/types.ts';
import { ChatTemplateError } from '../../hf/errors.ts';
import type { ChatTemplate, TemplateMessage } from '../../hf/chat-template.ts';
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
  render(messages: readonly TemplateMessage[], tools?: readonly OpenAITool[]): string {
    return this.template.render({ messages, tools, addGenerationPrompt: true });
  }

  observation(text: string, action?: readonly number[]): number[] {
    let tail = this.tail(text);
    const last = action?.at(-1);
    // The sampled ids already end the turn: what the template writes after it starts past that token.
    if (last !== undefined && last === this.turnEnd) {
      const end = this.tokenizer.decode([last]);
      if (tail.startsWith(end)) tail = tail.slice(end.length);
    }
    return this.tokenizer.encode(tail);
  }

  /** An action's text as the model would have written it: its ids, then the end of its turn. */
  action(text: string): number[] {
    const ids = this.tokenizer.encode(text);
    return this.turnEnd === null ? ids : [...ids, this.turnEnd];
  }

  /** The text the template writes after an assistant turn's content, up to the next generation prompt. */
  private tail(observation: string): string {
    const turn: TemplateMessage[] = [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: SENTINEL },
    ];
    let text: string;
    try {
      text = this.template.render({
        messages: [...turn, { role: 'tool', content: observation }],
        addGenerationPrompt: true,
      });
    } catch (error) {
      if (!(error instanceof ChatTemplateError)) throw error;
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
