import { z } from 'zod';
import {
  createRng,
  defineScenario,
  deriveSeed,
  formatInvalidAction,
  formatResults,
  tool,
  toolsSystemPrompt,
  type Policy,
  type Scenario,
  type Task,
  type TaskQuery,
  type ToolEnv,
} from 'agent-r1-ts';

/** A task with what judging it needs in `meta` (JSON: records keep it). */
interface CrateTask extends Task {
  meta: { crates: number; perCrate: number };
}

// A tool: zod parameters (the agent sees them as JSON Schema) and a function returning the raw result.
const multiply = tool({
  name: 'multiply',
  description: 'Multiply two integers.',
  parameters: z.object({ a: z.number().int(), b: z.number().int() }),
  execute: ({ a, b }) => a * b,
});

// Seeded tasks: the same {split, seed, count} always give the same tasks (never Math.random).
function tasks({ split, seed, count }: TaskQuery): CrateTask[] {
  const rng = createRng(deriveSeed('crates', split, seed));
  return Array.from({ length: count }, (_, i) => {
    const crates = rng.int(2, 40);
    const perCrate = rng.int(6, 99);
    return {
      id: `${split}-${seed}-${i}`,
      split,
      question: `A truck carries ${crates} crates of ${perCrate} apples each. How many apples does it carry?`,
      answer: String(crates * perCrate),
      meta: { crates, perCrate },
    };
  });
}

// The ToolEnv: what an action means (observation, process reward, done), then the outcome.
const env: ToolEnv<CrateTask> = {
  prompt: (task, tools) => [
    { role: 'system', content: toolsSystemPrompt('Answer with a number. Use the tools to compute.', tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ action, results }) => {
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid') return { observation: formatInvalidAction(action), reward: -0.1, done: false };
    return { observation: formatResults(results), reward: 0, done: false };
  },
  outcome: ({ task, answer }) => {
    const success = answer?.trim() === task.answer;
    return { reward: success ? 1 : 0, success };
  },
};

// A reference policy: shows the task can be done (scenario check plays it, twice, and replays it).
const expert: Policy = {
  id: 'expert',
  version: '1',
  act: async ({ task, messages }) => {
    const last = messages.at(-1);
    if (last?.role === 'tool') return { text: `<answer>${last.content}</answer>` };
    const { crates, perCrate } = (task as CrateTask).meta;
    return {
      text: `<tool_call>${JSON.stringify({ name: 'multiply', arguments: { a: crates, b: perCrate } })}</tool_call>`,
    };
  },
};

const scenario: Scenario<CrateTask> = {
  id: 'crates',
  version: '1',
  description: 'Count the apples on a truck with a multiply tool.',
  splits: ['train', 'dev', 'test'],
  options: {},
  tasks,
  tools: [multiply],
  env,
  policies: { expert: () => expert },
  episode: { maxTurns: 4 },
};

export default defineScenario(scenario);
