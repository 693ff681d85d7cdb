import {
  canonicalJson,
  syncEffects,
  withoutEffects,
  type Json,
  type Message,
  type StepResult,
  type Task,
  type ToolResult,
  type TurnRecord,
  type ToolEnv,
  type OpenAITool,
} from 'agent-r1-ts';
import { digestDb, TODAY } from './db.ts';
import { ACTING_TOOLS, IDENTIFY_TOOLS, RULES } from './tools.ts';
import { applyEffect, createDeskState, disposeDeskState, type DeskEffect, type DeskState } from './world.ts';
import { RETURN_WINDOW_DAYS } from './order-machine.ts';

/** Process reward for identifying the customer before reading or changing anything. */
export const IDENTIFY_REWARD = 0.1;
/** Penalty for each request the store's policy refused. */
export const VIOLATION_PENALTY = 0.2;
/** Penalty for an action that is neither a well-formed tool call nor an answer. */
export const FORMAT_PENALTY = 0.1;
/** Penalty for each call that failed (unknown tool, bad arguments, tool error). */
export const CALL_ERROR_PENALTY = 0.05;

export function systemPrompt(tools: readonly OpenAITool[]): string {
  return [
    'You are a customer support agent for an online store. Today is ' + TODAY + '.',
    'Store policy (requests that break it are refused):',
    ...Object.values(RULES).map((r) => `- ${r}`),
    "- Refunds go to the order's original payment method.",
    '- If the policy does not allow a request, do not attempt it: explain why in your answer.',
    '',
    'Tools:',
    JSON.stringify(tools),
    '',
    'Call a tool with <tool_call>{"name": "...", "arguments": {...}}</tool_call>. When the request is handled',
    '(or cannot be), reply to the customer with <answer>...</answer>.',
  ].join('\n');
}

function renderResult(result: ToolResult): string {
  if (!result.ok) return `[${result.name}] error: ${result.content}`;
  const shown =
    result.data !== undefined && !result.truncated ? canonicalJson(withoutEffects(result.data)) : result.content;
  return `[${result.name}] ${shown}`;
}

function dataOf(result: ToolResult): { [key: string]: Json } {
  const d = result.data;
  return d !== null && typeof d === 'object' && !Array.isArray(d) ? d : {};
}

function identifies(result: ToolResult): boolean {
  return result.ok && IDENTIFY_TOOLS.has(result.name) && dataOf(result)['found'] === true;
}

/** The step's reading of its results: refusals, and whether the customer was identified before acting. */
export function judgeResults(history: readonly TurnRecord[], results: readonly ToolResult[]) {
  const earlier = history.flatMap((t) => t.results);
  let identified = earlier.some(identifies);
  let acted = earlier.some((r) => ACTING_TOOLS.has(r.name));
  let identifiedFirst = false;
  const violations: Array<{ tool: string; rule: string }> = [];
  let callErrors = 0;
  for (const result of results) {
    if (!result.ok) callErrors += 1;
    const data = dataOf(result);
    if (data['refused'] === true) violations.push({ tool: result.name, rule: String(data['rule']) });
    if (identifies(result) && !identified && !acted) identifiedFirst = true;
    if (identifies(result)) identified = true;
    if (ACTING_TOOLS.has(result.name)) acted = true;
  }
  return { identifiedFirst, violations, callErrors };
}

/** `tool(arg, …)` from a tool's JSON schema. */
function signature(t: OpenAITool): string {
  const schema = t.function.parameters as { properties?: Record<string, unknown> };
  return `${t.function.name}(${Object.keys(schema.properties ?? {}).join(', ')})`;
}

/**
 * The same policy with the tools named by their signatures instead of their JSON schemas: a quarter
 * of the length, for a small model that reads the prompt at every step (the `prompt=compact` option).
 */
export function compactSystemPrompt(tools: readonly OpenAITool[]): string {
  return [
    'You are a customer support agent for an online store. Today is ' + TODAY + '.',
    'Store policy (requests that break it are refused):',
    ...Object.values(RULES).map((r) => `- ${r}`),
    '- If the policy does not allow a request, do not attempt it: explain why in your answer.',
    `Tools: ${tools.map(signature).join(', ')}.`,
    'Call a tool with <tool_call>{"name": "...", "arguments": {...}}</tool_call>; reply to the customer with <answer>...</answer>.',
  ].join('\n');
}

/**
 * The policy in one line and the tools by signature: half the compact prompt, for a
 * model trained from scratch on demonstrations (the `prompt=terse` option), which learns the rules
 * from what the demonstrations do and reads the prompt again at every step of the step-level MDP.
 */
export function terseSystemPrompt(tools: readonly OpenAITool[]): string {
  return [
    `Store support, today ${TODAY}. Identify the customer first; only their orders. Cancel or change the address only while pending or processed; return items only from a delivered order, within ${RETURN_WINDOW_DAYS} days, once. Else decline.`,
    `Tools: ${tools.map(signature).join(', ')}.`,
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call> or <answer>...</answer>.',
  ].join('\n');
}

/** The desk's ToolEnv, with one of its system prompts (the full one by default), in a world of `customers`. */
export function deskEnv(
  prompt: ((tools: readonly OpenAITool[]) => string) | undefined,
  customers: number,
): ToolEnv<Task, DeskState> {
  return {
    ...supportDeskEnv,
    init: () => createDeskState(customers),
    ...(prompt && {
      prompt: (task, tools): Message[] => [
        { role: 'system', content: prompt(tools) },
        { role: 'user', content: task.question },
      ],
    }),
  };
}

/**
 * The state card: the newest result of each tool called so far, as the observations render them
 * (who the customer is, the order's details, what a change did), in place of the transcript: all an
 * agent needs to carry a request through, at a size that does not grow with the episode.
 */
export function deskCard(history: readonly TurnRecord[]): string {
  const newest = new Map<string, string>();
  for (const turn of history) {
    for (const result of turn.results) {
      newest.delete(result.name); // a tool called again moves to the end
      newest.set(result.name, renderResult(result));
    }
  }
  return newest.size === 0 ? 'Known so far: nothing yet.' : ['Known so far:', ...newest.values()].join('\n');
}

export const supportDeskEnv: ToolEnv<Task, DeskState> = {
  init: () => createDeskState(),
  dispose: (state) => disposeDeskState(state),
  prompt: (task, tools): Message[] => [
    { role: 'system', content: systemPrompt(tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ state, action, results, history }): StepResult => {
    // In replay the tools did not run: bring the database and the order machines up to date.
    syncEffects(state, results, (e: DeskEffect) => applyEffect(state, e));
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid') {
      return {
        observation: `Error: ${action.error}. Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call> or reply with <answer>...</answer>.`,
        reward: -FORMAT_PENALTY,
        done: false,
        info: { format_error: true },
      };
    }
    const { identifiedFirst, violations, callErrors } = judgeResults(history, results);
    const reward =
      (identifiedFirst ? IDENTIFY_REWARD : 0) - VIOLATION_PENALTY * violations.length - CALL_ERROR_PENALTY * callErrors;
    const info: { [key: string]: Json } = {};
    if (violations.length > 0) info['violations'] = violations;
    if (identifiedFirst) info['identified_first'] = true;
    if (callErrors > 0) info['call_errors'] = callErrors;
    return {
      observation: results.map(renderResult).join('\n'),
      reward: Math.round(reward * 1e6) / 1e6,
      done: false,
      ...(Object.keys(info).length > 0 ? { info } : {}),
    };
  },
  card: ({ history }) => deskCard(history),
  outcome: ({ task, state, history }) => {
    const match = digestDb(state.db) === task.meta?.['expectedDigest'];
    const violations = history.reduce(
      (n, t) => n + (Array.isArray(t.info?.['violations']) ? (t.info!['violations'] as Json[]).length : 0),
      0,
    );
    const identifiedFirst = history.some((t) => t.info?.['identified_first'] === true);
    return {
      reward: match ? 1 : 0,
      success: match,
      metrics: { db_match: match ? 1 : 0, violations, identified_first: identifiedFirst ? 1 : 0 },
    };
  },
};
