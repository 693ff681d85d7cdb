import { hash } from 'node:crypto';
import { xoroshiro128plus, unsafeUniformIntDistribution, type RandomGenerator } from 'pure-rand';

/**
 * A seeded random stream. Every random choice that can reach an episode record (sampling, world
 * transitions, task generation) draws from one of these, never from Math.random.
 */
export interface Rng {
  /** Uniform float in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max] (both inclusive). */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  shuffle<T>(items: readonly T[]): T[];
  /** True with probability p. */
  chance(p: number): boolean;
  /** The generator's state, so a stream can be saved and resumed exactly. */
  state(): readonly number[];
}

/** A 32-bit seed derived from any list of parts (run seed, task id, sample index, stream name). */
export function deriveSeed(...parts: Array<string | number>): number {
  let key = '';
  for (let i = 0; i < parts.length; i++) key += (i > 0 ? '\u0000' : '') + parts[i];
  // The digest's first four bytes as a little-endian int32, read from hex: a Buffer per call costs
  // more than the hash of a short key.
  const h = hash('sha256', key, 'hex');
  return parseInt(h.slice(6, 8) + h.slice(4, 6) + h.slice(2, 4) + h.slice(0, 2), 16) | 0;
}

export function createRng(seed: number | string | readonly number[]): Rng {
  const gen: RandomGenerator = Array.isArray(seed)
    ? xoroshiro128plus.fromState(seed as readonly number[])
    : xoroshiro128plus(typeof seed === 'number' ? seed | 0 : deriveSeed(seed as string));
  const int = (min: number, max: number) => unsafeUniformIntDistribution(min, max, gen);
  const next = () => int(0, 2 ** 30 - 1) / 2 ** 30 + int(0, 2 ** 23 - 1) / 2 ** 53;
  return {
    next,
    int,
    pick: (items) => {
      if (items.length === 0) throw new RangeError('pick from an empty list');
      return items[int(0, items.length - 1)]!;
    },
    shuffle: (items) => {
      const out = items.slice();
      for (let i = out.length - 1; i > 0; i--) {
        const j = int(0, i);
        [out[i], out[j]] = [out[j]!, out[i]!];
      }
      return out;
    },
    chance: (p) => next() < p,
    state: () => gen.getState(),
  };
}
