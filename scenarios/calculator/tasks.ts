import { createRng, deriveSeed, type Rng, type Task } from 'agent-r1-ts';
import { evaluateArithmetic, formatNumber } from './arithmetic.ts';

export const SPLITS = ['train', 'dev', 'test'] as const;

const NAMES = [
  'Ava',
  'Ben',
  'Chloe',
  'Dev',
  'Elif',
  'Farid',
  'Gina',
  'Hugo',
  'Iris',
  'Jonas',
  'Kemal',
  'Lena',
  'Mia',
  'Noah',
  'Omar',
  'Priya',
];
const THINGS = ['apples', 'marbles', 'stickers', 'books', 'coins', 'shells', 'pencils', 'cards'];

interface Problem {
  question: string;
  expression: string;
  type: string;
}

type Template = (rng: Rng) => Problem;

const templates: Template[] = [
  (rng) => {
    const [who, what] = [rng.pick(NAMES), rng.pick(THINGS)];
    const [a, b, c] = [rng.int(10, 99), rng.int(2, 60), rng.int(1, 9)];
    return {
      type: 'add-sub',
      question: `${who} has ${a} ${what}, gets ${b} more and then gives away ${c}. How many ${what} does ${who} have now?`,
      expression: `${a} + ${b} - ${c}`,
    };
  },
  (rng) => {
    const what = rng.pick(THINGS);
    const [a, b, c] = [rng.int(2, 19), rng.int(2, 12), rng.int(2, 9)];
    return {
      type: 'multiply',
      question: `A box holds ${a} rows of ${b} ${what}. How many ${what} are in ${c} boxes?`,
      expression: `${a} * ${b} * ${c}`,
    };
  },
  (rng) => {
    const [who, what] = [rng.pick(NAMES), rng.pick(THINGS)];
    const [per, people, extra] = [rng.int(3, 25), rng.int(2, 9), rng.int(1, 30)];
    return {
      type: 'divide',
      question: `${who} shares ${per * people} ${what} equally among ${people} friends and then finds ${extra} more. How many does one friend have if ${who} gives all the found ones to that friend?`,
      expression: `${per * people} / ${people} + ${extra}`,
    };
  },
  (rng) => {
    const what = rng.pick(THINGS);
    const [a, b, c] = [rng.int(2, 40), rng.int(2, 40), rng.int(2, 9)];
    return {
      type: 'mixed',
      question: `There are ${a} red and ${b} blue ${what} in each bag. How many ${what} are in ${c} bags?`,
      expression: `(${a} + ${b}) * ${c}`,
    };
  },
];

/** Seeded arithmetic word problems; a split's tasks depend only on (seed, split). */
export function calculatorTasks(split: string, seed: number, count: number): Task[] {
  const tasks: Task[] = [];
  for (let i = 0; i < count; i++) {
    const rng = createRng(deriveSeed(seed, 'calculator', split, i));
    const problem = rng.pick(templates)(rng);
    // Fields in canonical (sorted) order, as records write them (see inCanonicalOrder).
    tasks.push({
      answer: formatNumber(evaluateArithmetic(problem.expression)),
      id: `calc-${split}-${seed}-${i}`,
      meta: { expression: problem.expression },
      question: problem.question,
      split,
      type: problem.type,
    });
  }
  return tasks;
}
