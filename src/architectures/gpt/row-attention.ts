import type { KVCache } from '../kv-cache.ts';

/**
 * Causal attention of `n` new positions of one row on that row's cache, after their keys/values
 * were written at positions [start, start + n). q: the new queries [n, d] (already scaled), out:
 * [n, d]. Accumulates in float64.
 */
export function attendRow(
  q: Float32Array,
  qOffset: number,
  k: Float32Array,
  v: Float32Array,
  start: number,
  n: number,
  heads: number,
  width: number,
  out: Float32Array,
  outOffset: number,
): void {
  const dh = width / heads;
  const scores = new Float64Array(start + n);
  const acc = new Float64Array(dh);
  const qh = new Float64Array(dh);
  for (let i = 0; i < n; i++) {
    const keys = start + i + 1;
    const qi = qOffset + i * width;
    for (let h = 0; h < heads; h++) {
      const ho = h * dh;
      for (let c = 0; c < dh; c++) qh[c] = q[qi + ho + c]!;
      let max = -Infinity;
      for (let j = 0, kj = ho; j < keys; j++, kj += width) {
        let s = 0;
        for (let c = 0; c < dh; c++) s += qh[c]! * k[kj + c]!;
        scores[j] = s;
        if (s > max) max = s;
      }
      let z = 0;
      for (let j = 0; j < keys; j++) {
        const e = Math.exp(scores[j]! - max);
        scores[j] = e;
        z += e;
      }
      acc.fill(0);
      for (let j = 0, vj = ho; j < keys; j++, vj += width) {
        const p = scores[j]! / z;
        for (let c = 0; c < dh; c++) acc[c]! += p * v[vj + c]!;
      }
      const o = outOffset + i * width + ho;
      for (let c = 0; c < dh; c++) out[o + c] = acc[c]!;
    }
  }
}

/**
 * The copy head's output for one row's newest position, in JS (like attendRow, so a row's numbers
 * depend on that row alone): attention of query `q` [copyWidth] (already scaled) over the row's
 * `n` cached copy keys, scattered onto the cached token ids, mixed with the vocabulary softmax of
 * `logits` by `gate` (the probability of generating rather than copying). Returns log-probabilities
 * [V] (what sampling reads as logits). Accumulates in float64.
 */
export function copyMixRow(
  logits: Float32Array,
  q: Float32Array,
  cache: KVCache,
  n: number,
  gate: number,
): Float32Array {
  const V = logits.length;
  const w = cache.copyWidth;
  const p = new Float64Array(V);
  let max = -Infinity;
  for (let i = 0; i < V; i++) if (logits[i]! > max) max = logits[i]!;
  let z = 0;
  for (let i = 0; i < V; i++) {
    const e = Math.exp(logits[i]! - max);
    p[i] = e;
    z += e;
  }
  for (let i = 0; i < V; i++) p[i] = (gate * p[i]!) / z;
  const scores = new Float64Array(n);
  let smax = -Infinity;
  for (let j = 0, kj = 0; j < n; j++, kj += w) {
    let s = 0;
    for (let c = 0; c < w; c++) s += q[c]! * cache.copyKeys[kj + c]!;
    scores[j] = s;
    if (s > smax) smax = s;
  }
  let sz = 0;
  for (let j = 0; j < n; j++) {
    const e = Math.exp(scores[j]! - smax);
    scores[j] = e;
    sz += e;
  }
  for (let j = 0; j < n; j++) p[cache.ids[j]!]! += ((1 - gate) * scores[j]!) / sz;
  const out = new Float32Array(V);
  for (let i = 0; i < V; i++) out[i] = Math.log(p[i]! + COPY_EPS);
  return out;
}

/** Added to the mixture's probabilities before the log, so that no token is impossible (log 0). */
export const COPY_EPS = 1e-9;
