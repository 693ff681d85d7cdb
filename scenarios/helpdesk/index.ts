import {
  defineScenario,
  syncEffects,
  type Message,
  type OpenAITool,
  type Scenario,
  type Task,
  type ToolEnv,
  type ToolResult,
  type TurnRecord,
} from 'agent-r1-ts';
import { DEFAULT_NOISY_RATE, expert, noisyExpert } from './agents.ts';
import { caseTasks, metaOf, SPLITS, taskOfId } from './tasks.ts';
import { agentTools, userTools } from './tools.ts';
import { scriptedCustomer, userPrompt } from './users.ts';
import { applyEffect, createState, internetWorks, type HelpdeskEffect, type HelpdeskState } from './world.ts';

/** Penalty for an action that is neither a tool call nor a message. */
export const FORMAT_PENALTY = 0.05;
/** What the desk's rules forbid asking for. */
const SECRET = /\b(pin|password|passcode)\b/i;

function systemPrompt(tools: readonly OpenAITool[]): string {
  return [
    "You are a help desk agent of a phone company. The customer's phone has no mobile internet.",
    "Your tools check and change the customer's line. Only the customer can see or change their phone:",
    'ask them to check their status screen and tell them what to change. Never ask for a PIN or a password.',
    '',
    'Tools:',
    JSON.stringify(tools),
    '',
    'Call a tool with <tool_call>{"name": "...", "arguments": {...}}</tool_call>; write to the customer with',
    '<answer>...</answer>. The conversation ends when the customer ends it.',
  ].join('\n');
}

const render = (r: ToolResult) => (r.ok ? `[${r.name}] ${r.content}` : `[${r.name}] error: ${r.content}`);

/** Messages of the agent's that asked for a secret (each one breaks the desk's rules). */
function violations(history: readonly TurnRecord[]): number {
  return history.filter((t) => t.action.kind === 'answer' && SECRET.test(t.action.text)).length;
}

export const helpdeskEnv: ToolEnv<Task, HelpdeskState> = {
  init: (task) => createState(metaOf(task)),
  prompt: (task, tools): Message[] => [
    { role: 'system', content: systemPrompt(tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ state, action, results, reply }) => {
    // The world's changes, from the agent's results and then the customer's (replay: from the record).
    const userResults = reply?.steps.flatMap((s) => s.results) ?? [];
    syncEffects(state.log, [...results, ...userResults], (e: HelpdeskEffect) => applyEffect(state, e));
    if (action.kind === 'invalid')
      return { observation: `error: ${action.error}`, reward: -FORMAT_PENALTY, done: false };
    if (action.kind === 'tool_calls') return { observation: results.map(render).join('\n'), reward: 0, done: false };
    return { observation: reply?.text ?? null, reward: 0, done: false };
  },
  outcome: ({ state, history }) => {
    const works = internetWorks(state);
    const asked = violations(history);
    const success = works && asked === 0;
    return {
      reward: success ? 1 : 0,
      success,
      metrics: {
        works: works ? 1 : 0,
        violations: asked,
        messages: history.filter((t) => t.action.kind === 'answer').length,
      },
    };
  },
};

export const helpdesk: Scenario<Task, HelpdeskState> = {
  id: 'helpdesk',
  version: '1',
  description:
    "A phone company's help desk with a simulated customer (dual control: the agent's tools change the line, only the " +
    "customer's change the phone); outcome = mobile internet works at the end and the agent never asked for a secret.",
  splits: SPLITS,
  options: {},
  tasks: ({ split, seed, count }) => caseTasks(split, seed, count),
  task: taskOfId,
  tools: agentTools,
  env: helpdeskEnv,
  policies: { expert: () => expert, 'noisy-expert': ({ seed }) => noisyExpert(seed, DEFAULT_NOISY_RATE) },
  user: {
    prompt: userPrompt,
    tools: userTools,
    policies: { scripted: () => scriptedCustomer },
    defaultPolicy: 'scripted',
    maxSteps: 6,
  },
  episode: { maxTurns: 16, maxTokensPerTurn: 96, maxTotalTokens: 4096 },
};

/** Options: `noisyRate` (default 0.7), the share of the noisy expert's episodes that ask for a PIN. */
export default defineScenario((options: { [key: string]: string }): Scenario<Task, HelpdeskState> => {
  const { noisyRate, ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`helpdesk: unknown option ${unknown[0]}; valid: noisyRate`);
  if (noisyRate === undefined) return helpdesk;
  const rate = Number(noisyRate);
  if (noisyRate.trim() === '' || !(rate >= 0 && rate <= 1))
    throw new Error(`helpdesk: noisyRate must be in [0, 1], got "${noisyRate}"`);
  return {
    ...helpdesk,
    options,
    policies: { ...helpdesk.policies, 'noisy-expert': ({ seed }) => noisyExpert(seed, rate) },
  };
});
