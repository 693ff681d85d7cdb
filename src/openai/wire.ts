import { z } from 'zod';

/**
 * The OpenAI chat-completions wire format: the request schema the server validates (zod 4) and the
 * message shapes both the server and the external-policy client speak. Unknown request fields are
 * ignored (clients send many optional ones), known ones are checked.
 */

export interface OpenAIToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * A chat message, normalized as real clients send it (see `normalizeMessages`): text content only,
 * `developer` read as `system`, an assistant's content null when it only calls tools, `name` kept.
 */
export type OpenAIMessage =
  | { role: 'system' | 'user'; content: string; name?: string }
  | { role: 'assistant'; content: string | null; tool_calls?: OpenAIToolCall[]; name?: string }
  | { role: 'tool'; content: string; tool_call_id: string };

export type AssistantMessage = Extract<OpenAIMessage, { role: 'assistant' }>;

/**
 * Text content: a string, or an array of parts whose text parts are joined (an image or audio part is
 * refused by its type: this server serves text models). One schema rather than a union, so that the
 * client is told which part was refused, not only that no branch matched.
 */
const textContent = z.unknown().transform((value, ctx): string => {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) {
    ctx.addIssue({ code: 'custom', message: 'content must be a string or an array of text parts' });
    return z.NEVER;
  }
  const texts: string[] = [];
  for (const [i, part] of value.entries()) {
    const { type, text } = (part ?? {}) as { type?: unknown; text?: unknown };
    if (type !== 'text') {
      const what = typeof type === 'string' ? `of type "${type}"` : 'without a type';
      ctx.addIssue({
        code: 'custom',
        path: [i],
        message: `a content part ${what} is not supported (only "text" parts: this server serves text models)`,
      });
      return z.NEVER;
    }
    if (typeof text !== 'string') {
      ctx.addIssue({ code: 'custom', path: [i, 'text'], message: 'a text content part needs "text" as a string' });
      return z.NEVER;
    }
    texts.push(text);
  }
  return texts.join('');
});

const toolCallSchema = z.object({
  id: z.string().min(1),
  type: z.literal('function'),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const messageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.enum(['system', 'developer', 'user']), content: textContent, name: z.string().optional() }),
  z.object({
    role: z.literal('assistant'),
    content: textContent.nullish(),
    tool_calls: z.array(toolCallSchema).nullish(),
    name: z.string().optional(),
  }),
  z.object({ role: z.literal('tool'), content: textContent, tool_call_id: z.string().min(1) }),
]);

const toolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'a tool name is 1-64 letters, digits, _ or -'),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});

/**
 * `auto` and `none` are honoured (`none`: an answer is never read as tool calls). Forcing a call
 * (`required`, or a named function) would need constrained decoding, which this server does not
 * do: such a request is refused with a 400 saying so rather than answered as if it were `auto`.
 */
const FORCED_CALL = 'is not supported: this server does not constrain decoding to force a tool call (use "auto")';
const toolChoiceSchema = z.union([
  z.enum(['none', 'auto']),
  z.literal('required').superRefine((_, ctx) => ctx.addIssue({ code: 'custom', message: `"required" ${FORCED_CALL}` })),
  z
    .object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) })
    .superRefine((c, ctx) =>
      ctx.addIssue({ code: 'custom', message: `a named function ("${c.function.name}") ${FORCED_CALL}` }),
    ),
]);

/**
 * The most messages and tools one request may hold. Each is rendered by the model's chat template on
 * the thread that serves every client, and a template may take time quadratic in them: a request
 * over these is refused (400) before any of it is rendered. OpenAI's own API takes 2,048 messages
 * and 128 tools.
 */
export const MAX_REQUEST_MESSAGES = 4096;
export const MAX_REQUEST_TOOLS = 1024;

function tooMany(input: unknown, limit: number, what: 'messages' | 'tools'): string {
  const given = Array.isArray(input) ? `${input.length} ${what}` : `too many ${what}`;
  return `${given}: a request holds at most ${limit} (MAX_REQUEST_${what.toUpperCase()})`;
}

export const chatCompletionRequestSchema = z.object({
  model: z.string().min(1),
  messages: z
    .array(messageSchema)
    .min(1, 'messages must hold at least one message')
    .max(MAX_REQUEST_MESSAGES, { error: (issue) => tooMany(issue.input, MAX_REQUEST_MESSAGES, 'messages') }),
  tools: z
    .array(toolSchema)
    .max(MAX_REQUEST_TOOLS, { error: (issue) => tooMany(issue.input, MAX_REQUEST_TOOLS, 'tools') })
    .nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  seed: z
    .number()
    .int()
    .min(-(2 ** 31))
    .max(2 ** 32 - 1)
    .nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  n: z.literal(1, { error: 'only n = 1 is supported' }).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.literal(0, { error: 'top_logprobs is not supported (only 0)' }).nullish(),
  /** vLLM's extension: `logprobs.content[].token` as `token_id:N`. */
  return_tokens_as_token_ids: z.boolean().nullish(),
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

type RawMessage = z.infer<typeof messageSchema>;

function text(content: string | null | undefined): string | null {
  return content ?? null;
}

/**
 * A validated request's messages in the normalized form the gateway records: text parts joined,
 * `developer` as `system`, `name` kept, an assistant's content as sent (null or absent: null; the
 * `openai` package and the AI SDK send null beside tool_calls). What a chat template is given is
 * `templateMessages` of these.
 */
export function normalizeMessages(messages: readonly RawMessage[]): OpenAIMessage[] {
  return messages.map((m): OpenAIMessage => {
    const name = 'name' in m && m.name !== undefined ? { name: m.name } : {};
    if (m.role === 'assistant') {
      const calls = m.tool_calls ?? [];
      return {
        role: 'assistant',
        content: text(m.content),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
        ...name,
      };
    }
    if (m.role === 'tool') return { role: 'tool', content: text(m.content) ?? '', tool_call_id: m.tool_call_id };
    return { role: m.role === 'developer' ? 'system' : m.role, content: text(m.content) ?? '', ...name };
  });
}

/**
 * The messages as a chat template is given them: every content a string (an assistant's null is
 * "": templates test `'</think>' in message.content`, which fails on null), the rest as normalized.
 */
export function templateMessages(messages: readonly OpenAIMessage[]): Array<OpenAIMessage & { content: string }> {
  return messages.map((m) => ({ ...m, content: m.content ?? '' }));
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: never[];
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  system_fingerprint: string;
  choices: Array<{
    index: number;
    message: AssistantMessage & { refusal: null };
    finish_reason: FinishReason;
    logprobs: { content: TokenLogprob[]; refusal: null } | null;
    /** The generated token ids (vLLM's `return_token_ids` field); clients that do not know it ignore it. */
    token_ids?: number[];
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}
