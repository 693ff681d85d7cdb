import { MAX_ARGUMENT_DEPTH, nestsDeeperThan } from '../core/json-depth.ts';
import type { Json, ParsedAction, ToolCall } from '../core/types.ts';

const TOOL_OPEN = '<tool_call>';
const TOOL_CLOSE = '</tool_call>';
const ANSWER_OPEN = '<answer>';
const ANSWER_CLOSE = '</answer>';

/**
 * Reads an action in the Hermes/Qwen format: one or more `<tool_call>{"name", "arguments"}</tool_call>`
 * spans, or one `<answer>…</answer>`. Text around the tags is allowed. Never throws: anything else is
 * `invalid`, with an error that names the problem (it becomes the agent's next observation).
 * Its own objects are built with their keys in canonical order (see inCanonicalOrder); the
 * arguments are kept as the model wrote them.
 */
export function parseAction(text: string): ParsedAction {
  if (typeof text !== 'string') return invalid('the action is not text');
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
