import type { Json, Message, ToolCall } from '../core/types.ts';
import { parseAction } from '../parse/parse-action.ts';
import type { AssistantMessage, OpenAIMessage, OpenAIToolCall } from './wire.ts';

/**
 * Bridging between our episodes (Hermes action text, one observation per turn) and OpenAI chat
 * messages (structured tool_calls, one tool message per call). Used by the server (to read a
 * conversation back into the trained template), by the external-policy client (to send an
 * episode's history) and by export (training data). Every conversion here has an inverse, so a
 * round trip through the OpenAI shape gives back the same actions and the same observation text.
 */

const TOOL_CALL_SPAN = /<tool_call>[\s\S]*?<\/tool_call>/g;
const TAGS = /<\/?(tool_call|answer)>/;

/** Content of the other tool messages of a turn whose observation could not be split per call. */
export const SEE_FIRST_RESULT = '(the results of all calls are in the first tool message)';

/** An action that calls tools, as an OpenAI assistant message: the text around the calls and the calls. */
export function actionToAssistant(text: string, callId: (index: number) => string): AssistantMessage {
  const action = parseAction(text);
  if (action.kind !== 'tool_calls') return { role: 'assistant', content: text };
  const rest = text.replace(TOOL_CALL_SPAN, '').trim();
  return { role: 'assistant', content: rest === '' ? null : rest, tool_calls: toolCallsToOpenAI(action.calls, callId) };
}

function toolCallsToOpenAI(calls: readonly ToolCall[], callId: (index: number) => string): OpenAIToolCall[] {
  return calls.map((c, i) => ({
    id: callId(i),
    type: 'function',
    function: { name: c.name, arguments: JSON.stringify(c.arguments) },
  }));
}

/**
 * An assistant message as Hermes action text: the content, then one `<tool_call>` per call. Arguments
 * that are a JSON object go in as that object; anything else goes in as a JSON string, so the parser
 * reports it as bad arguments (what the model did is kept, not repaired).
 */
export function assistantToAction(message: { content: string | null; tool_calls?: readonly OpenAIToolCall[] }): string {
  const calls = message.tool_calls ?? [];
  const content = message.content ?? '';
  if (calls.length === 0) return content;
  const rendered = calls.map((c) => `<tool_call>${hermesCallJson(c)}</tool_call>`);
  return [...(content.trim() === '' ? [] : [content]), ...rendered].join('\n');
}

function hermesCallJson(call: OpenAIToolCall): string {
  let args: Json = call.function.arguments;
  try {
    const parsed = JSON.parse(call.function.arguments) as Json;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed;
  } catch {
    // Not JSON: kept as a string, which parseAction turns into a clear "not valid JSON" error.
  }
  const json = `{"name": ${JSON.stringify(call.function.name)}, "arguments": ${JSON.stringify(args)}}`;
  // A tag inside a string value would end the span early; JSON's \u003c escape keeps the value.
  return TAGS.test(json) ? json.replace(/</g, '\\u003c') : json;
}

/**
 * One turn's observation as tool messages, one per call. `formatResults` writes several results as
 * `[i] name: content` lines: those are split back per call; any other text goes whole into the
 * first message and the others point to it. `joinToolResults` inverts both.
 */
export function observationToToolMessages(observation: string, calls: readonly OpenAIToolCall[]): OpenAIMessage[] {
  if (calls.length === 1) return [{ role: 'tool', content: observation, tool_call_id: calls[0]!.id }];
  const parts = splitNumbered(
    observation,
    calls.map((c) => c.function.name),
  );
  return calls.map((c, i) => ({
    role: 'tool',
    content: parts ? parts[i]! : i === 0 ? observation : SEE_FIRST_RESULT,
    tool_call_id: c.id,
  }));
}

function splitNumbered(text: string, names: readonly string[]): string[] | null {
  const marker = (i: number) => `[${i + 1}] ${names[i]}: `;
  if (!text.startsWith(marker(0))) return null;
  const starts: number[] = [0];
  let at = marker(0).length;
  for (let i = 1; i < names.length; i++) {
    const found = text.indexOf(`\n${marker(i)}`, at);
    if (found < 0) return null;
    starts.push(found + 1);
    at = found + 1 + marker(i).length;
  }
  return starts.map((s, i) =>
    text.slice(s + marker(i).length, i + 1 < starts.length ? starts[i + 1]! - 1 : text.length),
  );
}

/** The observation text for a turn's tool messages (the inverse of observationToToolMessages). */
export function joinToolResults(results: ReadonlyArray<{ name: string; content: string }>): string {
  if (results.length === 1) return results[0]!.content;
  if (results.length > 1 && results.slice(1).every((r) => r.content === SEE_FIRST_RESULT)) return results[0]!.content;
  return results.map((r, i) => `[${i + 1}] ${r.name}: ${r.content}`).join('\n');
}

/**
 * An episode's history (system, user, then assistant/observation turns) as OpenAI messages.
 * `assistant(turn, text)` may supply the message the model actually sent for a turn (its own
 * tool-call ids); otherwise the text is converted with ids `call_<turn>_<i>`. An observation after a
 * turn without tool calls (a format error, say) goes as a user message: OpenAI allows tool messages
 * only as answers to tool calls.
 */
export function historyToOpenAI(
  history: readonly Message[],
  assistant: (turn: number, text: string) => AssistantMessage | undefined = () => undefined,
): OpenAIMessage[] {
  const out: OpenAIMessage[] = [];
  let turn = -1;
  let lastCalls: OpenAIToolCall[] = [];
  for (const m of history) {
    if (m.role === 'assistant') {
      turn++;
      const message = assistant(turn, m.content) ?? actionToAssistant(m.content, (i) => `call_${turn}_${i}`);
      lastCalls = message.tool_calls ?? [];
      out.push(message);
    } else if (m.role === 'tool' || (turn >= 0 && m.role !== 'system')) {
      if (lastCalls.length > 0) out.push(...observationToToolMessages(m.content, lastCalls));
      else out.push({ role: 'user', content: m.content });
      lastCalls = [];
    } else {
      out.push({ role: m.role, content: m.content });
    }
  }
  return out;
}
