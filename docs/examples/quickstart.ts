// The README's library example, importing the package by name as a user's code does.
// Run it: npx tsx docs/examples/quickstart.ts
import { z } from 'zod';
import { defineScenario, rollout, tool, type Policy, type ToolEnv } from 'agent-r1-ts';

const add = tool({
  name: 'add',
  description: 'Add two integers.',
  parameters: z.object({ a: z.number().int(), b: z.number().int() }),
  execute: ({ a, b }) => a + b, // the raw result: what happened
});

const env: ToolEnv = {
  // what it means: observation, process reward, done; then the outcome
  prompt: (task) => [{ role: 'user', content: task.question }],
  step: ({ action, results }) =>
    action.kind === 'answer'
      ? { observation: null, reward: 0, done: true }
      : { observation: action.kind === 'invalid' ? action.error : results[0]!.content, reward: 0, done: false },
  outcome: ({ task, answer }) => ({ reward: answer === task.answer ? 1 : 0, success: answer === task.answer }),
};

const scenario = defineScenario({
  id: 'adder',
  version: '1',
  description: 'Add two numbers with a tool.',
  splits: ['train'],
  options: {},
  tasks: ({ split, seed, count }) =>
    Array.from({ length: count }, (_, i) => ({
      id: `${seed}-${i}`,
      split,
      question: `What is ${i} + ${seed}?`,
      answer: `${i + seed}`,
      meta: { a: i, b: seed },
    })),
  tools: [add],
  env,
  policies: {},
});

const expert: Policy = {
  // a scripted policy; a checkpoint or an OpenAI-compatible model plugs in the same way
  id: 'expert',
  version: '1',
  act: async ({ task, messages }) =>
    messages.at(-1)?.role === 'tool'
      ? { text: `<answer>${messages.at(-1)!.content}</answer>` }
      : { text: `<tool_call>${JSON.stringify({ name: 'add', arguments: task.meta })}</tool_call>` },
};

const { records, summary } = await rollout({ scenario, policy: expert, split: 'train', episodes: 4, seed: 7 });
console.log(
  summary.successRate,
  records[0]!.turns.map((t) => t.text),
  records[0]!.endReason,
);
