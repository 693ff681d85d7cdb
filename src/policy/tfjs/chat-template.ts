import type { Message } from '../../core/types.ts';
import type { PolicyEncoding } from '../policy.ts';
import type { Tokenizer } from './tokenizer.ts';

/**
 * The chat template, as token ids (the history is never rendered to text and re-encoded):
 *
 *   <|system|> content <|end|> <|user|> content <|end|> … <|assistant|>
 *   [action tokens, generated] <|end|> <|tool|> <tool_response> text </tool_response> <|end|> <|assistant|>
 *   … [final action] <|end|> <|eos|>
 *
 * Roles and turn ends are control tokens that text can never produce, so a message cannot forge a turn.
 */
export function chatEncoding(tok: Tokenizer): PolicyEncoding & { action(text: string): number[] } {
  const role = (r: Message['role']) => tok.special(`<|${r}|>`);
  const end = tok.special('<|end|>');
  const assistant = tok.special('<|assistant|>');
  const closeAnswer = tok.special('</answer>');
  const closeCall = tok.special('</tool_call>');
  return {
    // Tool messages are wrapped as observations are, so that a context a ToolEnv writes (the
    // step-level MDP) reads like the history an episode builds: the concatenated history, written as
    // messages, encodes to its own ids wherever its actions' text encodes to the sampled ids.
    prompt(messages: readonly Message[]): number[] {
      const out: number[] = [];
      for (const m of messages) {
        out.push(role(m.role));
        if (m.role === 'tool') out.push(tok.special('<tool_response>'));
        tok.encode(m.content).forEach((id) => out.push(id));
        if (m.role === 'tool') out.push(tok.special('</tool_response>'));
        out.push(end);
      }
      out.push(assistant);
      return out;
    },
    observation(text: string, _action?: readonly number[], from: 'tool' | 'user' = 'tool'): number[] {
      if (from === 'user') return [end, role('user'), ...tok.encode(text), end, assistant];
      return [
        end,
        role('tool'),
        tok.special('<tool_response>'),
        ...tok.encode(text),
        tok.special('</tool_response>'),
        end,
        assistant,
      ];
    },
    end(): number[] {
      return [end, tok.eos];
    },
    /**
     * An action's text as the model would have produced it (for SFT on scripted policies' records):
     * a turn that no `</answer>` or `</tool_call>` closes (a user's plain message) ends where the model
     * writes `<|end|>`, so that ends it here too.
     */
    action(text: string): number[] {
      const ids = tok.encode(text);
      const last = ids.at(-1);
      return last === closeAnswer || last === closeCall ? ids : [...ids, end];
    },
  };
}
