import { createRng, deriveSeed, type Message, type Policy, type Task } from 'agent-r1-ts';
import { metaOf } from './tasks.ts';

/**
 * The two roles' scripted players. The guesser (the agent) asks once, then guesses the first item
 * that has the clue's word; the describer (the user) names the secret's attribute that no other item
 * has. The noisy describer, the demonstrations' user, names the shared attribute in `rate` of its
 * rounds (a clue that fits two items), drawn per round whatever the round is like.
 */

export const ASK = 'Which one is it?';
export const DEFAULT_NOISY_RATE = 0.5;

const say = (text: string) => ({ text: `<answer>${text}</answer>` });
const guess = (item: string) => ({
  text: `<tool_call>${JSON.stringify({ name: 'guess', arguments: { item } })}</tool_call>`,
});

/** The items the round shows, read back from the question as the guesser sees it. */
function itemsOf(messages: readonly Message[]): string[] {
  const question = messages.find((m) => m.role === 'user')?.content ?? '';
  const m = /^Items: (.*)\.$/.exec(question);
  return m ? m[1]!.split(', ') : [];
}

/** The describer's clue: its last message to the guesser. */
const clueOf = (messages: readonly Message[]) => {
  const users = messages.filter((m) => m.role === 'user');
  return users.length > 1 ? users.at(-1)!.content.trim().toLowerCase() : null;
};

function guesserAction(messages: readonly Message[]): { text: string } {
  const clue = clueOf(messages);
  if (clue === null) return say(ASK);
  const items = itemsOf(messages);
  return guess(items.find((it) => it.split(' ').includes(clue)) ?? items[0] ?? '');
}

export const expertGuesser: Policy = {
  id: 'expert',
  version: 'guessing-guesser-1',
  act: async ({ messages }) => guesserAction(messages),
};

/** What the describer is told (the opening of its own view; a model playing it reads this). */
export function describerPrompt(task: Task): Message[] {
  const { secret, items } = metaOf(task);
  const others = items.filter((it) => it !== secret);
  return [
    {
      role: 'system',
      content: [
        'You help a guesser find the secret item. Answer with one word: a color or a shape of the secret that no other item has.',
        `Secret: ${secret}.`,
        `Others: ${others.join(', ')}.`,
      ].join('\n'),
    },
  ];
}

function clue(task: Task, shared: boolean): string {
  const { secret, unique } = metaOf(task);
  const [color, shape] = secret.split(' ') as [string, string];
  return (unique === 'color') !== shared ? color : shape;
}

export const expertDescriber: Policy = {
  id: 'scripted',
  version: 'guessing-describer-1',
  act: async ({ task }) => ({ text: clue(task, false) }),
};

export function noisyDescriber(seed: number, rate: number): Policy {
  return {
    id: 'noisy',
    version: `guessing-noisy-describer-1:${rate}`,
    act: async ({ task, episodeId }) => {
      const shared = createRng(deriveSeed(seed, 'guessing-noisy-describer', episodeId)).next() < rate;
      return { text: clue(task, shared) };
    },
  };
}
