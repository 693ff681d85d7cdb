import { MAX_ARGUMENT_DEPTH, nestsDeeperThan } from '../core/json-depth.ts';
import type { ActionFormat, Json, ParsedAction, ToolCall } from '../core/types.ts';

const TOOL_OPEN = '<tool_call>';
const TOOL_CLOSE = '</tool_call>';
const ANSWER_OPEN = '<answer>';
const ANSWER_CLOSE = '</answer>';

/**
 * Reads an action's text in one of the formats a policy writes (`EpisodeConfig.actionFormat`):
 * - `tags` (the default; the built-in GPT's): one or more `<tool_call>{"name", "arguments"}</tool_call>`
 *   spans, or one `<answer>…</answer>`;
 * - `hermes` (Qwen, Hermes and most chat models): `<tool_call>` spans, or else the turn's text is the
 *   final answer (its `<answer>` when it has one; a `<think>…</think>` block is not part of it);
 * - `llama3-json` (Llama 3.x): the turn is one JSON object `{"name", "parameters"}` (or an array of
 *   them, for parallel calls), optionally after `<|python_tag|>`; or else the final answer.
 * Text around the tags is allowed. Never throws: anything else is `invalid`, with an error that names
 * the problem (it becomes the agent's next observation). Its own objects are built with their keys in
 * canonical order (see inCanonicalOrder); the arguments are kept as the model wrote them.
 */
export function parseAction(text: string, format: ActionFormat = 'tags'): ParsedAction {
  if (typeof text !== 'string') return invalid('the action is not text');
  if (format === 'llama3-json') return parseLlama3(text);
  if (format === 'hermes' && !text.includes(TOOL_OPEN) && !text.includes(TOOL_CLOSE) && !text.includes(ANSWER_OPEN))
    return finalAnswer(text);
  const calls = spans(text, TOOL_OPEN, TOOL_CLOSE);
  const answers = spans(text, ANSWER_OPEN, ANSWER_CLOSE);
  if (typeof calls === 'string') return invalid(calls);
  if (typeof answers === 'string') return invalid(answers);
  if (calls.length > 0 && answers.length > 0) {
    return invalid('the action has both <tool_call> and <answer>; call tools or answer, not both');
  }
  if (answers.length > 1) return invalid(`the action has ${answers.length} <answer> tags; give one answer`);
  if (answers.length === 1) {
    const answer = answers[0]!.trim();
    return answer ? { kind: 'answer', text: answer } : invalid('the <answer> is empty');
  }
  if (calls.length === 0) return invalid('the action has neither a <tool_call> nor an <answer>');
  const parsed: ToolCall[] = [];
  for (const [i, body] of calls.entries()) {
    const call = parseCall(body);
    if (typeof call === 'string') return invalid(calls.length > 1 ? `tool call ${i + 1}: ${call}` : call);
    parsed.push(call);
  }
  return { calls: parsed, kind: 'tool_calls' };
}

const THINK = /<think>[\s\S]*?<\/think>/g;
const PYTHON_TAG = '<|python_tag|>';

/** A turn without a tool call: its text, less any reasoning block, is the answer. */
function finalAnswer(text: string): ParsedAction {
  const answer = text.replace(THINK, '').trim();
  return answer ? { kind: 'answer', text: answer } : invalid('the turn is empty: call a tool or answer');
}

/** Llama 3.x's JSON tool calls: the whole turn is a call object, or an array of them. */
function parseLlama3(text: string): ParsedAction {
  let body = text.trim();
  if (body.startsWith(PYTHON_TAG)) body = body.slice(PYTHON_TAG.length).trim();
  if (!body.startsWith('{') && !body.startsWith('[')) return finalAnswer(text);
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    // A turn that opens like a call but is not JSON is taken for a failed call, not an answer.
    return invalid(`invalid JSON in the tool call: ${err instanceof Error ? err.message : String(err)}`);
  }
  const items = Array.isArray(value) ? value : [value];
  if (items.length === 0) return invalid('the tool call array is empty');
  const calls: ToolCall[] = [];
  for (const [i, item] of items.entries()) {
    const fields = item !== null && typeof item === 'object' && !Array.isArray(item) ? item : null;
    // Llama 3's templates name the arguments "parameters"; accept "arguments" too.
    const { name, parameters, arguments: args } = (fields ?? {}) as { [k: string]: unknown };
    const call = checkCall(fields ? name : undefined, parameters ?? args);
    if (typeof call === 'string') return invalid(items.length > 1 ? `tool call ${i + 1}: ${call}` : call);
    calls.push(call);
  }
  return { calls, kind: 'tool_calls' };
}

function invalid(error: string): ParsedAction {
  return { error, kind: 'invalid' };
}

/** The bodies between every open/close pair, or an error for unbalanced tags. */
function spans(text: string, open: string, close: string): string[] | string {
  const out: string[] = [];
  let at = 0;
  for (;;) {
    const start = text.indexOf(open, at);
    const stray = text.indexOf(close, at);
    if (start < 0) {
      return stray < 0 ? out : `${close} without an opening ${open}`;
    }
    if (stray >= 0 && stray < start) return `${close} without an opening ${open}`;
    const end = text.indexOf(close, start + open.length);
    if (end < 0) return `unclosed ${open} tag (expected ${close})`;
    const body = text.slice(start + open.length, end);
    if (body.includes(open)) return `nested ${open} inside ${open}`;
    out.push(body);
    at = end + close.length;
  }
}

function parseCall(body: string): ToolCall | string {
  let value: unknown;
  try {
    value = JSON.parse(body.trim());
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return `invalid JSON in <tool_call>: ${why}`;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return 'a <tool_call> must hold a JSON object {"name": …, "arguments": {…}}';
  }
  const { name, arguments: args } = value as { name?: unknown; arguments?: unknown };
  return checkCall(name, args);
}

/** A call's name and arguments (an object, or a string of JSON that is one), checked. */
function checkCall(name: unknown, args: unknown): ToolCall | string {
  if (typeof name !== 'string' || name.trim() === '') return 'the tool call has no "name" (a non-empty string)';
  if (args === undefined) return { arguments: {}, name };
  let obj: unknown = args;
  if (typeof args === 'string') {
    try {
      obj = JSON.parse(args);
    } catch (err) {
      return `"arguments" of ${name} is a string that is not valid JSON: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    return `"arguments" of ${name} must be a JSON object`;
  }
  // Deeper than any tool needs, and than the code that validates and records it can recurse.
  if (nestsDeeperThan(obj, MAX_ARGUMENT_DEPTH))
    return `"arguments" of ${name} nest deeper than ${MAX_ARGUMENT_DEPTH} levels`;
  return { arguments: obj as { [key: string]: Json }, name };
}
