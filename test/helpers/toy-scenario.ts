import { z } from 'zod';
import type { Task } from '../../src/core/types.ts';
import type { ToolEnv } from '../../src/env/tool-env.ts';
import { formatInvalidAction, formatResults } from '../../src/env/observation.ts';
import type { Policy } from '../../src/policy/policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { tool } from '../../src/tools/tool.ts';

/** A scenario with one tool per failure mode, for exercising every path of the episode machine. */
export const FORMAT_PENALTY = -0.5;

const tools = [
  tool({
    name: 'echo',
    description: 'returns its text',
    parameters: z.object({ text: z.string() }),
    execute: ({ text }) => text,
  }),
  tool({
    name: 'boom',
    description: 'always throws',
    parameters: z.object({}),
    execute: () => {
      throw new Error('kaboom');
    },
  }),
  tool({
    name: 'hang',
    description: 'never returns (until aborted)',
    parameters: z.object({}),
    timeoutMs: 50,
    execute: (_args, ctx) =>
      new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')))),
  }),
  tool({
    name: 'big',
    description: 'returns a lot',
    parameters: z.object({ n: z.number().int() }),
    execute: ({ n }) => 'x'.repeat(n),
  }),
  tool({
    name: 'roll',
    description: 'a die from the world stream',
    parameters: z.object({}),
    execute: (_a, ctx) => String(ctx.rng.int(1, 6)),
  }),
];

const env: ToolEnv<Task> = {
  prompt: (task) => [
    { role: 'system', content: 'toy' },
    { role: 'user', content: task.question },
  ],
  step: ({ action, results }) => {
    if (action.kind === 'invalid')
      return { observation: formatInvalidAction(action), reward: FORMAT_PENALTY, done: false };
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    return { observation: formatResults(results), reward: 0.1, done: false };
  },
  outcome: ({ task, answer }) => ({ reward: answer === task.answer ? 1 : 0, success: answer === task.answer }),
};

export function toyScenario(episode: Scenario['episode'] = {}): Scenario {
  return {
    id: 'toy',
    version: '1',
    description: 'test scenario',
    splits: ['train'],
    options: {},
    tasks: ({ split, count }) =>
      Array.from({ length: count }, (_, i) => ({ id: `toy-${i}`, split, question: 'say 42', answer: '42' })),
    tools,
    env,
    policies: {},
    episode: { maxToolOutputChars: 100, ...episode },
  };
}

/** A policy that says the given texts in order, then keeps repeating the last one. */
export function scripted(texts: string[]): Policy {
  return {
    id: 'scripted',
    version: '1',
    act: async ({ turn }) => ({ text: texts[Math.min(turn, texts.length - 1)]! }),
  };
}

export const call = (name: string, args: object = {}) =>
  `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
