import { createRng, deriveSeed, type Task, type TaskQuery } from 'agent-r1-ts';

export const SPLITS = ['train', 'dev', 'test'] as const;

/** A task with what judging it needs in `meta` (JSON: records keep it). */
export interface RoomTask extends Task {
  meta: { start: number; target: number };
}

/**
 * Seeded tasks: the same {split, seed, count} always give the same tasks (scenario check calls this
 * twice and compares). Every draw comes from a stream derived from the split and seed, never from
 * Math.random or the clock.
 */
export function roomTasks({ split, seed, count }: TaskQuery): RoomTask[] {
  const rng = createRng(deriveSeed('thermostat', split, seed));
  return Array.from({ length: count }, (_, i) => {
    const start = rng.int(14, 26);
    const target = rng.int(18, 23);
    return {
      id: `${split}-${seed}-${i}`,
      split,
      question: `The room is at ${start} °C. Bring it to exactly ${target} °C, then switch the HVAC unit off.`,
      meta: { start, target },
    };
  });
}
