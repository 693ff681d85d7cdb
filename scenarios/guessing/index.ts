import {
  defineScenario,
  tool,
  type Message,
  type Outcome,
  type Scenario,
  type Task,
  type ToolEnv,
  type TurnRecord,
} from 'agent-r1-ts';
import { z } from 'zod';
import { DEFAULT_NOISY_RATE, describerPrompt, expertDescriber, expertGuesser, noisyDescriber } from './roles.ts';
import { metaOf, roundTasks, SPLITS, taskOfId } from './tasks.ts';

/**
 * A cooperative game of two roles. The guesser (the agent) sees the items and asks; the describer
 * (the user) sees which item is the secret and answers with one word; the guesser then guesses with
 * its one tool. Both score the round: 1 when the guess is the secret. What a clue means is a
 * convention of the two roles, so each role's training changes what the other should do: the game
 * compares co-training both (`train --roles agent,user`) with training the guesser against a fixed
 * describer.
 */

/** Penalty for an action that is neither a tool call nor a message. */
export const FORMAT_PENALTY = 0.05;

const SYSTEM = [
  'Find the secret item. Ask the describer with <answer>your question</answer>; it answers with one word.',
  'Then guess with <tool_call>{"name": "guess", "arguments": {"item": "..."}}</tool_call>.',
].join('\n');

const guessTool = tool({
  name: 'guess',
  description: 'Guess the secret item (ends the round).',
  parameters: z.object({ item: z.string().min(1).max(64).describe('The item, as listed (e.g. "red circle").') }),
  execute: ({ item }) => `You guessed ${item}.`,
});

/** The round's guess: the first `guess` call of the episode, if any. */
function guessOf(history: readonly TurnRecord[]): string | null {
  for (const turn of history) {
    if (turn.action.kind !== 'tool_calls') continue;
    const call = turn.action.calls.find((c) => c.name === 'guess');
    if (call && typeof call.arguments['item'] === 'string') return call.arguments['item'];
  }
  return null;
}

const normal = (s: string) => s.trim().toLowerCase().replace(/\s+/g, ' ');

export const guessingEnv: ToolEnv<Task, null> = {
  init: () => null,
  prompt: (task): Message[] => [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: task.question },
  ],
  step: ({ action, results, reply }) => {
    if (action.kind === 'invalid')
      return { observation: `error: ${action.error}`, reward: -FORMAT_PENALTY, done: false };
    if (action.kind === 'tool_calls') {
      const guessed = action.calls.some((c) => c.name === 'guess');
      return { observation: results.map((r) => r.content).join('\n'), reward: 0, done: guessed };
    }
    return { observation: reply?.text ?? null, reward: 0, done: false };
  },
  outcome: ({ task, history }): Outcome => {
    const guessed = guessOf(history);
    const success = guessed !== null && normal(guessed) === normal(metaOf(task).secret);
    return {
      reward: success ? 1 : 0,
      success,
      metrics: {
        guessed: guessed === null ? 0 : 1,
        asked: history.some((t) => t.action.kind === 'answer') ? 1 : 0,
      },
    };
  },
};

function guessing(rate: number, options: { [key: string]: string }): Scenario<Task, null> {
  return {
    id: 'guessing',
    version: '1',
    description:
      'A cooperative two-role game: the guesser (the agent) asks, the describer (the user) who sees the secret answers ' +
      'with one word, the guesser guesses; both score 1 when the guess is the secret.',
    splits: SPLITS,
    options,
    tasks: ({ split, seed, count }) => roundTasks(split, seed, count),
    task: taskOfId,
    tools: [guessTool],
    env: guessingEnv,
    policies: { expert: () => expertGuesser },
    user: {
      prompt: describerPrompt,
      tools: [],
      policies: { scripted: () => expertDescriber, noisy: ({ seed }) => noisyDescriber(seed, rate) },
      defaultPolicy: 'scripted',
      maxSteps: 1,
    },
    episode: { maxTurns: 2, maxTokensPerTurn: 32, maxTotalTokens: 512 },
  };
}

/** Options: `noisyRate` (default 0.5), the share of rounds whose clue the noisy describer gets wrong. */
export default defineScenario((options: { [key: string]: string }): Scenario<Task, null> => {
  const { noisyRate, ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new Error(`guessing: unknown option ${unknown[0]}; valid: noisyRate`);
  if (noisyRate === undefined) return guessing(DEFAULT_NOISY_RATE, {});
  const rate = Number(noisyRate);
  if (noisyRate.trim() === '' || !(rate >= 0 && rate <= 1))
    throw new Error(`guessing: noisyRate must be in [0, 1], got "${noisyRate}"`);
  return guessing(rate, options);
});
