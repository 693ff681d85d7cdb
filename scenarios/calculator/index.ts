import { z } from 'zod';
import {
  createRng,
  formatInvalidAction,
  formatResults,
  toolsSystemPrompt,
  defineScenario,
  tool,
  type Task,
  type ToolEnv,
  type Policy,
  type Scenario,
  type StepInput,
  type StepResult,
} from 'agent-r1-ts';
import { evaluateArithmetic, formatNumber } from './arithmetic.ts';
import { calculatorTasks, SPLITS } from './tasks.ts';
import { applyStep, MULTISTEP_OPS, multistepTasks, type Step } from './multistep.ts';
import { DEFAULT_NOISY_EARLY, multistepExpert, noisyMultistepExpert } from './multistep-policies.ts';

/** Reward weights: outcome 1 for the exact number; small process terms shape the format. */
export const CALCULATOR_REWARDS = {
  correct: 1,
  /** An action that is neither a well-formed call nor an answer. */
  invalidAction: -0.2,
  /** A call the runner refused (unknown tool, bad arguments) or that failed. */
  toolError: -0.1,
};

export const calculate = tool({
  name: 'calculate',
  description: 'Evaluate an arithmetic expression with + - * / ^ and parentheses.',
  parameters: z.object({ expression: z.string().min(1).max(200).describe('for example "(3 + 4) * 2"') }),
  cacheable: true,
  execute: ({ expression }) => formatNumber(evaluateArithmetic(expression)),
});

const INSTRUCTIONS =
  'Solve the word problem. Use the calculate tool for the arithmetic, then give the number as the answer.';

/** A turn's observation and penalties: an unreadable action, a call the runner refused or that failed. */
function judgeStep({ action, results }: Pick<StepInput, 'action' | 'results'>): StepResult {
  if (action.kind === 'invalid') {
    return { observation: formatInvalidAction(action), reward: CALCULATOR_REWARDS.invalidAction, done: false };
  }
  if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
  const failed = results.filter((r) => !r.ok).length;
  return { observation: formatResults(results), reward: failed * CALCULATOR_REWARDS.toolError, done: false };
}

const env: ToolEnv<Task> = {
  prompt: (task, tools) => [
    { content: toolsSystemPrompt(INSTRUCTIONS, tools), role: 'system' },
    { content: task.question, role: 'user' },
  ],
  step: (input) => judgeStep(input),
  outcome: ({ task, answer }) => {
    const given = answer === null ? NaN : Number(answer.replace(/,/g, '').trim());
    const success = answer !== null && answer.trim() !== '' && given === Number(task.answer);
    return { reward: success ? CALCULATOR_REWARDS.correct : 0, success };
  },
};

/** The process reward of a multistep problem's call that reaches the next intermediate result. */
export const STEP_REWARD = 0.1;

/**
 * The multistep problems' ToolEnv: as the calculator's, plus a process reward for each call whose
 * result is the next intermediate value of the solution (the first time: calling it again earns
 * nothing), so a chain that goes further before it goes wrong scores more, as partial credit.
 */
const multistepEnv: ToolEnv<Task> = {
  ...env,
  step: (input) => {
    const base = judgeStep(input);
    if (input.action.kind !== 'tool_calls') return base;
    const { start, steps } = input.task.meta as unknown as { start: number; steps: Step[] };
    const reached = input.history.reduce((n, t) => Math.max(n, Number(t.info?.['reached'] ?? 0)), 0);
    let value = start;
    const expected = steps.map((s) => (value = applyStep(value, s)));
    let now = reached;
    for (const r of input.results) if (r.ok && Number(r.content) === expected[now]) now++;
    const reward = base.reward + STEP_REWARD * (now - reached);
    return { ...base, reward: Math.round(reward * 1e6) / 1e6, info: { reached: now } };
  },
};

/** Calls the calculator with the task's expression, then answers with what it returned. */
const expert: Policy = {
  id: 'expert',
  version: 'calculator-expert-1',
  act: async ({ task, messages }) => {
    const last = messages.at(-1);
    if (last?.role === 'tool' && !last.content.startsWith('Error')) return { text: `<answer>${last.content}</answer>` };
    const args = JSON.stringify({ name: 'calculate', arguments: { expression: task.meta?.expression } });
    return { text: `<tool_call>${args}</tool_call>` };
  },
};

/** Junk: half of its actions are malformed, the rest random calls and guesses. */
const random: Policy = {
  id: 'random',
  version: 'calculator-random-1',
  act: async ({ seed }) => {
    const rng = createRng(seed);
    const n = () => rng.int(0, 99);
    const choices = [
      () =>
        `<tool_call>{"name": "calculate", "arguments": {"expression": "${n()} ${rng.pick(['+', '-', '*', '/'])} ${n()}"}}</tool_call>`,
      () => `<answer>${n()}</answer>`,
      () => `<tool_call>{"name": "calculate", "arguments": {"expression": "${n()} +"}}</tool_call>`,
      () => `<tool_call>{"name": "calculate", "arguments": {"expr": "${n()}"}}</tool_call>`,
      () => `<tool_call>{"name": "calculate", "arguments": {"expression": ${n()}</tool_call>`,
      () => `<tool_call>{"name": "calculate", "arguments": {"expression": "${n()}"}}`,
      () => `<tool_call>{"name": "abacus", "arguments": {}}</tool_call>`,
      () => `I think the answer is ${n()}.`,
      () => `<tool_call>{"arguments": {"expression": "1"}}</tool_call>`,
      () => `<answer></answer>`,
    ];
    return { text: rng.pick(choices)() };
  },
};

/** The calculator as it has always been: one-expression problems (no options). */
export const calculator = {
  id: 'calculator',
  version: '1',
  description: 'Arithmetic word problems with a safe calculate tool; outcome = the exact number.',
  splits: SPLITS,
  options: {},
  tasks: ({ split, seed, count }) => calculatorTasks(split, seed, count),
  tools: [calculate],
  env,
  policies: { expert: () => expert, random: () => random },
  episode: { maxTurns: 4, maxTokensPerTurn: 96, maxTotalTokens: 512 },
} satisfies Scenario;

/**
 * Options: `problems=multistep` gives GSM8K-like problems of 2–6 operations, one tool call per
 * operation, with a harder test split and an out-of-distribution split of more steps than training
 * (multistep.ts), and a `noisy-expert` that answers one operation early at the rate `noisyEarly` (default 0.7).
 */
export default defineScenario((options: { [key: string]: string }): Scenario => {
  const { problems = 'basic', noisyEarly, ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`calculator: unknown option ${unknown[0]}; valid: problems, noisyEarly`);
  if (problems === 'basic') {
    if (noisyEarly !== undefined) throw new Error('calculator: noisyEarly needs problems=multistep');
    return calculator;
  }
  if (problems !== 'multistep') throw new Error(`calculator: problems must be basic or multistep, got "${problems}"`);
  return multistepCalculator(options, noisyEarly === undefined ? DEFAULT_NOISY_EARLY : rate(noisyEarly));
});

function rate(text: string): number {
  const x = Number(text);
  if (text.trim() === '' || !(x >= 0 && x <= 1))
    throw new Error(`calculator: noisyEarly must be in [0, 1], got "${text}"`);
  return x;
}

function multistepCalculator(options: { [key: string]: string }, noisyEarly: number): Scenario {
  return {
    ...calculator,
    description:
      'Multi-step word problems (GSM8K-like: 2–6 operations, one calculate call each); outcome = the exact number.',
    splits: ['train', 'dev', 'test', 'ood'],
    options,
    env: multistepEnv,
    tasks: ({ split, seed, count }) => {
      if (!(split in MULTISTEP_OPS)) throw new Error(`calculator has no split "${split}" with problems=multistep`);
      return multistepTasks(split, seed, count);
    },
    policies: {
      expert: () => multistepExpert,
      'noisy-expert': ({ seed }) => noisyMultistepExpert(seed, noisyEarly),
      random: () => random,
    },
    episode: { maxTurns: 8, maxTokensPerTurn: 48, maxTotalTokens: 1024 },
  };
}
