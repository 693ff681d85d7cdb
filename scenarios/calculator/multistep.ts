import { createRng, deriveSeed, type Json, type Rng, type Task } from 'agent-r1-ts';

/**
 * Multi-step word problems, in the spirit of GSM8K: a starting amount, then two to six events that
 * change it, each one operation. The agent is expected to work it out one `calculate` call per
 * operation (the running result, the operation, the event's number) and answer the last result.
 *
 * Splits: train and dev have 2–4 operations; test is harder (3–4); ood has more steps than any
 * training problem (5–6). The numbers of one problem are distinct, so each appears once in the text.
 */

export type Op = '+' | '-' | '*' | '/';

export interface Step {
  op: Op;
  n: number;
}

export interface MultistepProblem {
  start: number;
  steps: Step[];
  question: string;
  answer: number;
}

const NAMES = ['Ava', 'Ben', 'Chloe', 'Dev', 'Elif', 'Farid', 'Gina', 'Hugo', 'Iris', 'Jonas', 'Lena', 'Omar'];
const THINGS = ['apples', 'marbles', 'stickers', 'books', 'coins', 'shells', 'pencils', 'cards'];

/** Operation counts per split. */
export const MULTISTEP_OPS: { [split: string]: [number, number] } = {
  train: [2, 4],
  dev: [2, 4],
  test: [3, 4],
  ood: [5, 6],
};

const sentence: { [op in Op]: (who: string, what: string, n: number) => string } = {
  '+': (who, what, n) => `${who} gets ${n} more ${what}.`,
  '-': (who, what, n) => `${who} gives away ${n} ${what}.`,
  '*': (who, _what, n) => `Then ${who} has ${n} times as many.`,
  '/': (who, _what, n) => `${who} splits them into ${n} equal piles and keeps one pile.`,
};

export function applyStep(value: number, { op, n }: Step): number {
  return op === '+' ? value + n : op === '-' ? value - n : op === '*' ? value * n : value / n;
}

/** One problem of `ops` operations whose running values stay whole and between 1 and 999. */
export function multistepProblem(rng: Rng, ops: number): MultistepProblem {
  for (;;) {
    const used = new Set<number>();
    const fresh = (lo: number, hi: number): number | null => {
      for (let tries = 0; tries < 20; tries++) {
        const n = rng.int(lo, hi);
        if (!used.has(n)) {
          used.add(n);
          return n;
        }
      }
      return null;
    };
    const start = fresh(12, 90)!;
    let value = start;
    const steps: Step[] = [];
    let previous: Op | null = null;
    for (let k = 0; k < ops; k++) {
      const choices: Op[] = (['+', '-', '*', '/'] as Op[]).filter((op) => {
        if (op === previous) return false;
        if (op === '*') return value <= 250;
        if (op === '/') return [2, 3, 4, 5].some((d) => value % d === 0 && !used.has(d) && value / d >= 4);
        if (op === '-') return value > 10;
        return value < 900;
      });
      if (choices.length === 0) break;
      const op = rng.pick(choices);
      const n =
        op === '+'
          ? fresh(3, Math.min(95, 998 - value))
          : op === '-'
            ? fresh(2, Math.min(95, value - 2))
            : op === '*'
              ? fresh(2, Math.min(4, Math.floor(999 / value)))
              : (rng.shuffle([2, 3, 4, 5].filter((d) => value % d === 0 && !used.has(d) && value / d >= 4))[0] ?? null);
      if (n === null) break;
      used.add(n);
      steps.push({ op, n });
      value = applyStep(value, { op, n });
      previous = op;
    }
    if (steps.length !== ops) continue;
    const who = rng.pick(NAMES);
    const what = rng.pick(THINGS);
    const question = [
      `${who} has ${start} ${what}.`,
      ...steps.map((s) => sentence[s.op](who, what, s.n)),
      `How many ${what} does ${who} have at the end?`,
    ].join(' ');
    return { start, steps, question, answer: value };
  }
}

/** `count` seeded problems of a split (train's depend on the seed; dev, test and ood are fixed). */
export function multistepTasks(split: string, seed: number, count: number): Task[] {
  const [lo, hi] = MULTISTEP_OPS[split]!;
  const fixed = split !== 'train';
  const tasks: Task[] = [];
  for (let i = 0; i < count; i++) {
    const rng = createRng(deriveSeed(fixed ? 0 : seed, 'calculator-multistep', split, i));
    const problem = multistepProblem(rng, rng.int(lo, hi));
    // Fields in canonical (sorted) order, as records write them (see inCanonicalOrder; each step's
    // own { op, n } is not, so a record writes this task with the canonical writer).
    tasks.push({
      answer: String(problem.answer),
      id: fixed ? `calc-ms-${split}-${i}` : `calc-ms-${split}-${seed}-${i}`,
      meta: { start: problem.start, steps: problem.steps as unknown as Json },
      question: problem.question,
      split,
      type: `${problem.steps.length}-ops`,
    });
  }
  return tasks;
}

/** The next expression the expert computes, given the results so far (null: every step done). */
export function nextExpression(meta: { start: number; steps: Step[] }, results: readonly number[]): string | null {
  const k = results.length;
  if (k >= meta.steps.length) return null;
  const running = k === 0 ? meta.start : results[k - 1]!;
  const { op, n } = meta.steps[k]!;
  return `${running} ${op} ${n}`;
}
