// AssemblyScript (not TypeScript): a step's rows as the decode kernels read them (the GPT's,
// ../gpt/kernel/decode-step.as.ts, and the Llama family's, ../llama/kernel/llama-step.as.ts) and the
// host writes them (./kernel-host.ts): the rows table, each row's KV cache, and attention over it.

import { attend, ptr, slot } from './simd.as';

// ---- a row of the step: i32 slots at `rows + 32·r` ----
export const R_NEW: i32 = 0; // new tokens
export const R_START: i32 = 1; // tokens already in the cache
export const R_PREV: i32 = 2; // the token before the new ones (-1: none)
export const R_CAP: i32 = 3; // cache capacity (positions)
export const R_KV: i32 = 4; // the cache: per layer K [cap][width] then V [cap][width]; then the kernel's own
export const R_TOK: i32 = 5; // offset of the row's tokens in `tokens`
const ROW_BYTES: i32 = 32;

/** Row r's slots. */
@inline export function rowAt(rows: usize, r: i32): usize {
  return rows + <usize>r * ROW_BYTES;
}

/** Layer l's keys, [cap][width] float32, in a row's cache (l = the layer count: what follows the layers). */
@inline export function keysAt(row: usize, l: i32, width: i32): usize {
  return ptr(row, R_KV) + ((<usize>(2 * l) * <usize>slot(row, R_CAP) * <usize>width) << 2);
}

/** The values after keys at `keys`, [cap][width]. */
@inline export function valuesAt(row: usize, keys: usize, width: i32): usize {
  return keys + ((<usize>slot(row, R_CAP) * <usize>width) << 2);
}

/**
 * One new token's attention, head by head: query head h (dh columns of q) against its group's keys
 * and values (key head h / group, a cache row `width` floats wide) over positions < n, into ctx. Of the
 * (token, head) pairs counted from `pair`, thread t of T takes those ≡ t mod T; returns the next pair.
 */
@inline export function attendHeads(q: usize, kc: usize, vc: usize, width: i32, H: i32, group: i32, dh: i32, n: i32, scores: usize, ctx: usize, pair: i32, t: i32, T: i32): i32 {
  for (let h = 0; h < H; h++) {
    if (pair++ % T != t) continue;
    const g = (h / group) * dh;
    attend(q + (<usize>(h * dh) << 2), kc + (<usize>g << 2), vc + (<usize>g << 2), width, dh, n, scores, ctx + (<usize>(h * dh) << 2));
  }
  return pair;
}
