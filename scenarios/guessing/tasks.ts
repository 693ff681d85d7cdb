import { createRng, deriveSeed, type Task } from 'agent-r1-ts';

/**
 * Rounds of the game: a secret item (a color and a shape) among three others. Exactly one of the
 * secret's two attributes is its own (no other item has it); the other is shared with another
 * item, so a clue naming it leaves the guesser unsure. Which one is unique is drawn per round: the
 * describer must look at the others to choose. A round is a pure function of its split and index.
 *
 * Splits: train, dev, test; ood's secrets are the held-out color-shape pairs no other split's secret
 * is. test and ood are fixed sets (the first 200 indices).
 */

export const COLORS = ['red', 'blue', 'green', 'yellow', 'black', 'white'] as const;
export const SHAPES = ['circle', 'square', 'triangle', 'star', 'heart', 'moon'] as const;
export const SPLITS = ['train', 'dev', 'test', 'ood'] as const;
export const FIXED_SPLIT_SIZE = 200;
const ITEMS = 4;

export interface RoundMeta {
  secret: string;
  /** Every item, in the order the guesser sees them (the secret among them). */
  items: string[];
  /** The secret's attribute no other item has. */
  unique: 'color' | 'shape';
  [key: string]: string | string[];
}

const item = (color: string, shape: string) => `${color} ${shape}`;

/**
 * The held-out pairs: a sixth of the (color, shape) pairs is never a secret outside `ood`, where
 * every secret is one (the words are all known; the combination is new).
 */
const heldOut = (color: string, shape: string) =>
  (COLORS.indexOf(color as (typeof COLORS)[number]) + SHAPES.indexOf(shape as (typeof SHAPES)[number])) % 6 === 0;

export function roundTask(split: string, index: number): Task {
  const rng = createRng(deriveSeed(0, 'guessing', split, index));
  let color: string;
  let shape: string;
  do {
    color = rng.pick(COLORS);
    shape = rng.pick(SHAPES);
  } while (heldOut(color, shape) !== (split === 'ood'));
  const unique = rng.next() < 0.5 ? 'color' : 'shape';
  const secret = item(color, shape);
  const others = new Set<string>();
  // One item shares the secret's other attribute; the rest never share its unique one.
  if (unique === 'shape') others.add(item(color, rng.pick(SHAPES.filter((s) => s !== shape))));
  else others.add(item(rng.pick(COLORS.filter((c) => c !== color)), shape));
  while (others.size < ITEMS - 1) {
    const c = rng.pick(unique === 'color' ? COLORS.filter((x) => x !== color) : COLORS);
    const s = rng.pick(unique === 'shape' ? SHAPES.filter((x) => x !== shape) : SHAPES);
    if (item(c, s) !== secret) others.add(item(c, s));
  }
  const items = rng.shuffle([secret, ...others]);
  return {
    id: `guessing-${split}-${index}`,
    split,
    question: `Items: ${items.join(', ')}.`,
    type: unique,
    answer: secret,
    meta: { secret, items, unique },
  };
}

export function roundTasks(split: string, seed: number, count: number): Task[] {
  if (split === 'test' || split === 'ood')
    return Array.from({ length: Math.min(count, FIXED_SPLIT_SIZE) }, (_, i) => roundTask(split, i));
  const rng = createRng(deriveSeed(seed, 'guessing-tasks', split));
  const picked = new Set<number>();
  while (picked.size < count) picked.add(rng.int(0, 99_999));
  return [...picked].map((i) => roundTask(split, i));
}

/** The task an id names, or undefined. */
export function taskOfId(id: string): Task | undefined {
  const m = /^guessing-(train|dev|test|ood)-(\d+)$/.exec(id);
  if (!m) return undefined;
  const index = Number(m[2]);
  if ((m[1] === 'test' || m[1] === 'ood') && index >= FIXED_SPLIT_SIZE) return undefined;
  if (index > 99_999) return undefined;
  return roundTask(m[1]!, index);
}

export function metaOf(task: Task): RoundMeta {
  return task.meta as unknown as RoundMeta;
}
