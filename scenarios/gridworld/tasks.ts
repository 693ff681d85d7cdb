import { ScenarioError, createRng, deriveSeed, type Json, type Task } from 'agent-r1-ts';
import { randomLargeLayout, randomLayout, renderMap, surroundings, type Layout } from './layout.ts';
import { successProbability, wayFrom } from './planner.ts';

export const SPLITS = ['train', 'dev', 'test'] as const;
/** The turn budget of an episode; layouts are screened against it. */
export const MAX_TURNS = 40;
/** A layout is used only if optimal play escapes it with at least this probability within MAX_TURNS. */
export const MIN_SOLVABILITY = 0.95;

/** The large dark dungeon's splits (ood: the rooms stacked, a layout family training never shows). */
export const LARGE_SPLITS = ['train', 'dev', 'test', 'ood'] as const;
/** The large dungeon's turn budget; its layouts are screened against it. */
export const LARGE_MAX_TURNS = 60;
/** Optimal play escapes a large layout with at least this probability (pits and slips make some harder). */
export const LARGE_MIN_SOLVABILITY = 0.9;

export type GridSize = 'small' | 'large';

/** The turn budget a layout was screened against (the large dungeon's are dark: they have a sight). */
export const turnsOf = (layout: Layout) => (layout.sight === undefined ? MAX_TURNS : LARGE_MAX_TURNS);

/** The layout of task `n` of a split: the first random layout, from the task's own seed, that optimal play can escape. */
export function layoutFor(
  split: string,
  n: number,
  seed: number,
  size: GridSize = 'small',
): { layout: Layout; solvability: number } {
  const large = size === 'large';
  for (let attempt = 0; attempt < 1000; attempt++) {
    const rng = createRng(deriveSeed(large ? 'gridworld-large' : 'gridworld', split, seed, n, attempt));
    const layout = large ? randomLargeLayout(rng, split === 'ood') : randomLayout(rng);
    const solvability = successProbability(layout, large ? LARGE_MAX_TURNS : MAX_TURNS);
    if (solvability >= (large ? LARGE_MIN_SOLVABILITY : MIN_SOLVABILITY)) return { layout, solvability };
  }
  throw new ScenarioError(`gridworld: no solvable layout for ${split} task ${n}`);
}

const at = (p: { x: number; y: number }) => `(${p.x}, ${p.y})`;

/** The state card's way, for the step before any card (at the start, the one other action is picking up the key). */
function firstMove(layout: Layout): string {
  return wayFrom(layout, { position: layout.start, hasKey: false, doorOpen: false }, turnsOf(layout)) ?? 'pick_up';
}

export function question(layout: Layout): string {
  if (layout.sight !== undefined) {
    // Short: the step-level agent reads it again at each of its 20–40 steps.
    return [
      `A dark dungeon, ${layout.width} × ${layout.height}; x grows east, y south. You are at ${at(layout.start)}`,
      `(around you: ${surroundings(layout, layout.start, false, false)}; way ${firstMove(layout)}).`,
      `Get the key at ${at(layout.key)}, unlock the door at ${at(layout.door)} from next to it (a stiff lock: retry),`,
      `reach the exit at ${at(layout.goal)}. Pits end the game; moves slip (${layout.slip}); you see ${layout.sight} cells around.`,
    ].join(' ');
  }
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
export function gridTasks(split: string, seed: number, count: number, size: GridSize = 'small'): Task[] {
  const splits: readonly string[] = size === 'large' ? LARGE_SPLITS : SPLITS;
  if (!splits.includes(split))
    throw new ScenarioError(`gridworld has no split "${split}"; valid: ${splits.join(', ')}`);
  if (!Number.isInteger(count) || count < 0)
    throw new ScenarioError(`task count must be a non-negative integer, got ${count}`);
  return Array.from({ length: count }, (_, i) => gridTask(split, seed, i, size));
}

/** Task i of a split (train's depend on the seed; the others are fixed). */
function gridTask(split: string, seed: number, i: number, size: GridSize): Task {
  const train = split === 'train';
  const { layout, solvability } = layoutFor(split, i, train ? seed : 0, size);
  const prefix = size === 'large' ? 'grid-large' : 'grid';
  return {
    id: train ? `${prefix}-train-s${seed}-${i}` : `${prefix}-${split}-${i}`,
    split,
    question: question(layout),
    type: `slip-${layout.slip >= (size === 'large' ? 0.1 : 0.18) ? 'high' : 'low'}`,
    meta: { layout: layout as unknown as Json, solvability: Math.round(solvability * 1e4) / 1e4 },
  };
}

/** The task an id names, made again (undefined: no task of this size has that id). */
export function gridTaskById(id: string, size: GridSize = 'small'): Task | undefined {
  const prefix = size === 'large' ? 'grid-large' : 'grid';
  const m = new RegExp(`^${prefix}-(?:train-s(-?\\d+)|([a-z]+))-(\\d+)$`).exec(id);
  if (!m) return undefined;
  const split = m[1] !== undefined ? 'train' : m[2]!;
  const splits: readonly string[] = size === 'large' ? LARGE_SPLITS : SPLITS;
  if (!splits.includes(split) || (split === 'train') !== (m[1] !== undefined)) return undefined;
  return gridTask(split, m[1] !== undefined ? Number(m[1]) : 0, Number(m[3]), size);
}
