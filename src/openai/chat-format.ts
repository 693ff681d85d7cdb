import { LRUCache } from 'lru-cache';
import { canonicalJson } from '../core/canonical-json.ts';
import type { ToolCall } from '../core/types.ts';
import { parseAction } from '../parse/parse-action.ts';
import { HfPolicy } from '../policy/hf/hf-policy.ts';
import { chatEncoding } from '../policy/tfjs/chat-template.ts';
import type { TemplateTool } from '../hf/chat-template.ts';
import { ChatBridge } from './chat-bridge.ts';
import { actionToAssistant } from './messages.ts';
import type { ServablePolicy } from './serving-policy.ts';
import { templateMessages, type AssistantMessage, type OpenAIMessage } from './wire.ts';

/**
 * How a served token policy reads an OpenAI conversation and writes its answer: its chat template,
 * its tokenizer and its tool-call syntax. The built-in GPT's (its own template, Hermes tags) and a
 * Hugging Face model's (its Jinja template with the request's tools, its own tool-call syntax).
 * Either way, an answer this server gave comes back as the ids that were sampled for it.
 */
export interface ChatFormat {
  /**
   * The conversation's ids, the generation prompt included; stops early once past `limit` ids. An
   * assistant message goes in as the ids `given` has for its index, else as the ids remembered for
   * it (an answer this server gave), else encoded from its text; with `given`, only `given` is asked.
   */
  prompt(
    messages: readonly OpenAIMessage[],
    tools: readonly TemplateTool[],
    limit: number,
    given?: (index: number) => readonly number[] | undefined,
  ): number[];
  /** Remembers the ids behind an answer this server returned. */
  remember(message: AssistantMessage, tokens: readonly number[]): void;
  /** An answer's text as an assistant message: its tool calls in OpenAI's shape when `structured`. */
  answer(
    text: string,
    structured: boolean,
    callId: (index: number) => string,
  ): { message: AssistantMessage; calls: boolean };
  /** Ids that end an answer (finish_reason "stop"). */
  stopTokens: ReadonlySet<number>;
  /** The most bytes of text one token stands for (a text of n bytes is at least n / this tokens). */
  maxTokenBytes: number;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  tokenText(id: number): string;
  tokenBytes(id: number): number[];
}

/** A policy the server serves: the built-in GPT's (a ServablePolicy) or a Hugging Face model's. */
export type ServedPolicy = ServablePolicy | HfPolicy;

export function contextLengthOf(policy: ServedPolicy): number {
  return policy instanceof HfPolicy ? policy.model.contextLength : policy.model.config.contextLength;
}

export function chatFormatFor(policy: ServedPolicy): ChatFormat {
  return policy instanceof HfPolicy ? hfFormat(policy) : gptFormat(policy);
}

/** The built-in GPT: its template has no tools section (it learned its tools from the system prompt). */
function gptFormat(policy: ServablePolicy): ChatFormat {
  const tok = policy.tokenizer;
  const bridge = new ChatBridge(chatEncoding(tok));
  return {
    prompt: (messages, _tools, limit, given) => bridge.render(messages, limit, given),
    remember: (message, tokens) => bridge.remember(message, tokens),
    answer: (text, structured, callId) => {
      const message = structured ? actionToAssistant(text, callId) : { role: 'assistant' as const, content: text };
      return { message, calls: message.tool_calls !== undefined && parseAction(text).kind === 'tool_calls' };
    },
    stopTokens: new Set([tok.special('</tool_call>'), tok.special('</answer>'), tok.special('<|end|>'), tok.eos]),
    maxTokenBytes: tok.maxTokenBytes,
    encode: (text) => tok.encode(text),
    decode: (ids) => tok.decode(ids),
    tokenText: (id) => tok.tokenText(id),
    tokenBytes: (id) => [...tok.bytes([id])],
  };
}

const TOOL_CALL_SPAN = /<tool_call>[\s\S]*?<\/tool_call>/g;

/** A Hugging Face model: the request's tools rendered by its template, tool calls read in its own syntax. */
function hfFormat(policy: HfPolicy): ChatFormat {
  const tok = policy.folder.tokenizer;
  const remembered = new LRUCache<string, readonly number[]>({ max: 10_000 });
  let maxTokenBytes = 0;
  return {
    prompt: (messages, tools, limit, given) =>
      policy.encode.conversation(
        templateMessages(messages),
        canonicalTools(tools),
        given ?? ((i) => remembered.get(key(messages[i] as AssistantMessage))),
        limit,
      ),
    remember: (message, tokens) => remembered.set(key(message), [...tokens]),
    answer: (text, structured, callId) => {
      const action = parseAction(text, policy.actionFormat);
      if (!structured || action.kind !== 'tool_calls')
        return { message: { role: 'assistant', content: text }, calls: false };
      const rest = policy.actionFormat === 'hermes' ? text.replace(TOOL_CALL_SPAN, '').trim() : '';
      return {
        message: {
          role: 'assistant',
          content: rest === '' ? null : rest,
          tool_calls: openAICalls(action.calls, callId),
        },
        calls: true,
      };
    },
    stopTokens: new Set(policy.folder.eosTokenIds),
    get maxTokenBytes() {
      if (maxTokenBytes === 0)
        for (let id = 0; id < tok.vocabSize; id++)
          maxTokenBytes = Math.max(maxTokenBytes, Buffer.byteLength(tok.decode([id])));
      return maxTokenBytes;
    },
    encode: (text) => tok.encode(text),
    decode: (ids) => tok.decode(ids),
    tokenText: (id) => tok.decode([id]),
    tokenBytes: (id) => [...Buffer.from(tok.decode([id]))],
  };
}

/**
 * Tools as the template is given them: canonical JSON (keys sorted), as a record stores them, so a
 * record's prompt ids re-render exactly from it whatever key order the client wrote its schemas in.
 */
export function canonicalTools(tools: readonly TemplateTool[]): TemplateTool[] {
  return JSON.parse(canonicalJson(tools)) as TemplateTool[];
}

function openAICalls(calls: readonly ToolCall[], callId: (index: number) => string) {
  return calls.map((c, i) => ({
    id: callId(i),
    type: 'function' as const,
    function: { name: c.name, arguments: JSON.stringify(c.arguments) },
  }));
}

function key(message: AssistantMessage): string {
  const content = message.content === null || message.content === '' ? null : message.content;
  return canonicalJson({ content, tool_calls: message.tool_calls ?? [] });
}
