import { createRng, deriveSeed, type Task } from 'agent-r1-ts';
import { PROBLEMS, type Problem } from './world.ts';

/**
 * Cases: a customer (a persona, a name, a number) whose phone has no mobile internet, for one to
 * three reasons. A case is a pure function of its split and index, so `task(id)` makes it again.
 *
 * Splits: train and dev have one problem; test one or two; ood two or three (combinations no
 * training case has). test and ood are fixed sets (the first 200 indices).
 */

export const PERSONAS = ['cooperative', 'terse', 'confused', 'private'] as const;
export type Persona = (typeof PERSONAS)[number];

export const SPLITS = ['train', 'dev', 'test', 'ood'] as const;
const PROBLEM_COUNT: { [split: string]: [number, number] } = { train: [1, 1], dev: [1, 1], test: [1, 2], ood: [2, 3] };
export const FIXED_SPLIT_SIZE = 200;

const NAMES = [
  'Ana Silva',
  'Ben Okafor',
  'Chen Wei',
  'Dana Levi',
  'Emil Novak',
  'Fatima Zahra',
  'Goran Petrov',
  'Hana Sato',
];

export interface CaseMeta {
  phone: string;
  name: string;
  persona: Persona;
  problems: Problem[];
  [key: string]: string | string[];
}

/** What the customer says first: all the agent knows at the start. */
export function openingLine(meta: CaseMeta): string {
  switch (meta.persona) {
    case 'cooperative':
      return `Hi, I'm ${meta.name}. Mobile internet stopped working on my phone. My number is ${meta.phone}.`;
    case 'terse':
      return 'No internet on my phone.';
    case 'confused':
      return "Hello? My phone doesn't do the internet anymore and I don't know why.";
    case 'private':
      return 'My mobile internet is not working.';
  }
}

export function caseTask(split: string, index: number): Task {
  const rng = createRng(deriveSeed(0, 'helpdesk', split, index));
  const [lo, hi] = PROBLEM_COUNT[split]!;
  const count = rng.int(lo, hi);
  const problems = rng
    .shuffle([...PROBLEMS])
    .slice(0, count)
    .sort() as Problem[];
  const digits = () => String(rng.int(0, 9999)).padStart(4, '0');
  const meta: CaseMeta = {
    name: rng.pick(NAMES),
    persona: rng.pick(PERSONAS),
    phone: `555-${String(rng.int(10, 99)).padStart(3, '0')}-${digits()}`,
    problems,
  };
  return {
    id: `helpdesk-${split}-${index}`,
    split,
    question: openingLine(meta),
    type: problems.join('+'),
    meta: { name: meta.name, persona: meta.persona, phone: meta.phone, problems },
  };
}

export function caseTasks(split: string, seed: number, count: number): Task[] {
  if (split === 'test' || split === 'ood')
    return Array.from({ length: Math.min(count, FIXED_SPLIT_SIZE) }, (_, i) => caseTask(split, i));
  // Generated splits: a seed picks distinct cases from a large pool.
  const rng = createRng(deriveSeed(seed, 'helpdesk-tasks', split));
  const picked = new Set<number>();
  while (picked.size < count) picked.add(rng.int(0, 99_999));
  return [...picked].map((i) => caseTask(split, i));
}

/** The task an id names, or undefined. */
export function taskOfId(id: string): Task | undefined {
  const m = /^helpdesk-(train|dev|test|ood)-(\d+)$/.exec(id);
  if (!m) return undefined;
  const index = Number(m[2]);
  if ((m[1] === 'test' || m[1] === 'ood') && index >= FIXED_SPLIT_SIZE) return undefined;
  if (index > 99_999) return undefined;
  return caseTask(m[1]!, index);
}

export function metaOf(task: Task): CaseMeta {
  return task.meta as unknown as CaseMeta;
}
