import { ScenarioError, createRng, deriveSeed, type Json, type Task } from 'agent-r1-ts';
import { randomLayout, renderMap, type Layout } from './layout.ts';
import { successProbability } from './planner.ts';

export const SPLITS = ['train', 'dev', 'test'] as const;
/** The turn budget of an episode; layouts are screened against it. */
export const MAX_TURNS = 40;
/** A layout is used only if optimal play escapes it with at least this probability within MAX_TURNS. */
export const MIN_SOLVABILITY = 0.95;

/** The layout of task `n` of a split: the first random layout, from the task's own seed, that optimal play can escape. */
export function layoutFor(split: string, n: number, seed: number): { layout: Layout; solvability: number } {
  for (let attempt = 0; attempt < 1000; attempt++) {
    const layout = randomLayout(createRng(deriveSeed('gridworld', split, seed, n, attempt)));
    const solvability = successProbability(layout, MAX_TURNS);
    if (solvability >= MIN_SOLVABILITY) return { layout, solvability };
  }
  throw new ScenarioError(`gridworld: no solvable layout for ${split} task ${n}`);
}

export function question(layout: Layout): string {
  return [
    'You are @ in a slippery dungeon. Reach the exit G. The exit is behind the locked door D: pick up the key K,',
    'stand next to the door and unlock it (the lock is stiff and may need several tries), then walk to G.',
    `Moves slip sideways with probability ${layout.slip}. Falling into a pit O ends the game. # is a wall. North is up.`,
    '',
    renderMap(layout, layout.start, false, false),
  ].join('\n');
}

/**
 * `count` dungeons of a split. Train dungeons depend on the seed (fresh ones each run); dev and test
 * are fixed sequences (the seed does not change them), so evaluations compare like with like.
 */
export function gridTasks(split: string, seed: number, count: number): Task[] {
  if (!(SPLITS as readonly string[]).includes(split))
    throw new ScenarioError(`gridworld has no split "${split}"; valid: ${SPLITS.join(', ')}`);
  if (!Number.isInteger(count) || count < 0)
    throw new ScenarioError(`task count must be a non-negative integer, got ${count}`);
  const tasks: Task[] = [];
  for (let i = 0; i < count; i++) {
    const train = split === 'train';
    const { layout, solvability } = layoutFor(split, i, train ? seed : 0);
    tasks.push({
      id: train ? `grid-train-s${seed}-${i}` : `grid-${split}-${i}`,
      split,
      question: question(layout),
      type: `slip-${layout.slip >= 0.18 ? 'high' : 'low'}`,
      meta: { layout: layout as unknown as Json, solvability: Math.round(solvability * 1e4) / 1e4 },
    });
  }
  return tasks;
}
