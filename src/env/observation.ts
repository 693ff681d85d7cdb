import type { ParsedAction, ToolResult } from '../core/types.ts';
import type { OpenAITool } from '../tools/tool.ts';

/** The observation text for a turn's tool results: each result's content, or its error. */
export function formatResults(results: readonly ToolResult[]): string {
  if (results.length === 1) return formatOne(results[0]!);
  return results.map((r, i) => `[${i + 1}] ${r.name}: ${formatOne(r)}`).join('\n');
}

function formatOne(r: ToolResult): string {
  return r.ok ? r.content : `Error: ${r.error?.message ?? r.content}`;
}

/** The observation for an action that could not be read. */
export function formatInvalidAction(action: Extract<ParsedAction, { kind: 'invalid' }>): string {
  return `Error: ${action.error}. Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call> or answer with <answer>...</answer>.`;
}

/** A system prompt that lists the tools (as JSON schemas) and the action format. */
export function toolsSystemPrompt(instructions: string, tools: readonly OpenAITool[]): string {
  const list = tools.map((t) => JSON.stringify(t.function)).join('\n');
  return [
    instructions,
    '',
    'Tools:',
    list,
    '',
    'To call a tool: <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>',
    'To give the final answer: <answer>ANSWER</answer>',
  ].join('\n');
}
