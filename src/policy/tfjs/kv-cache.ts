/**
 * One sequence's keys and values, per layer, in plain Float32Arrays ([T, d] row-major, heads side
 * by side): what an episode keeps between turns. The tensors decoder (decode.ts) attends on them in
 * JS (one query row in a few microseconds, while a tfjs kernel call costs tens, and a row's arithmetic
 * then depends on that row alone: bit-identical in any batch); the decode kernel copies them into its
 * memory, in the same layout, for a call. Appends grow the buffers by doubling.
 */
export class KVCache {
  length = 0;
  private capacity: number;
  readonly k: Float32Array[];
  readonly v: Float32Array[];
  /** Token id at each position (the copy head copies these). */
  ids: Int32Array;
  /** Copy-head keys [T, copyWidth] (models with a copy head; empty otherwise). */
  copyKeys: Float32Array;

  constructor(
    readonly layers: number,
    readonly width: number,
    capacity = 64,
    readonly copyWidth = 0,
  ) {
    this.capacity = Math.max(1, capacity);
    this.k = Array.from({ length: layers }, () => new Float32Array(this.capacity * width));
    this.v = Array.from({ length: layers }, () => new Float32Array(this.capacity * width));
    this.ids = new Int32Array(this.capacity);
    this.copyKeys = new Float32Array(this.capacity * copyWidth);
  }

  get bytes(): number {
    return this.capacity * (this.layers * 2 * this.width + this.copyWidth + 1) * 4;
  }

  /** Makes room for `n` more positions. */
  reserve(n: number): void {
    const need = this.length + n;
    if (need <= this.capacity) return;
    let cap = this.capacity;
    while (cap < need) cap *= 2;
    for (let l = 0; l < this.layers; l++) {
      this.k[l] = resized(this.k[l]!, this.length * this.width, cap * this.width);
      this.v[l] = resized(this.v[l]!, this.length * this.width, cap * this.width);
    }
    this.ids = resized(this.ids, this.length, cap);
    this.copyKeys = resized(this.copyKeys, this.length * this.copyWidth, cap * this.copyWidth);
    this.capacity = cap;
  }

  /** An independent copy of the first `n` positions (room for `extra` more). */
  prefix(n: number, extra = 0): KVCache {
    const keep = Math.max(0, Math.min(n, this.length));
    const c = new KVCache(this.layers, this.width, keep + Math.max(extra, 1), this.copyWidth);
    for (let l = 0; l < this.layers; l++) {
      c.k[l]!.set(this.k[l]!.subarray(0, keep * this.width));
      c.v[l]!.set(this.v[l]!.subarray(0, keep * this.width));
    }
    c.ids.set(this.ids.subarray(0, keep));
    c.copyKeys.set(this.copyKeys.subarray(0, keep * this.copyWidth));
    c.length = keep;
    return c;
  }

  /** An independent copy (room for `extra` more positions). */
  clone(extra = 0): KVCache {
    const c = new KVCache(this.layers, this.width, this.length + Math.max(extra, 1), this.copyWidth);
    for (let l = 0; l < this.layers; l++) {
      c.k[l]!.set(this.k[l]!.subarray(0, this.length * this.width));
      c.v[l]!.set(this.v[l]!.subarray(0, this.length * this.width));
    }
    c.ids.set(this.ids.subarray(0, this.length));
    c.copyKeys.set(this.copyKeys.subarray(0, this.length * this.copyWidth));
    c.length = this.length;
    return c;
  }
}

/** A new buffer of `size` elements holding the first `used` elements of `src`. */
function resized<T extends Float32Array | Int32Array>(src: T, used: number, size: number): T {
  const out = new (src.constructor as new (n: number) => T)(size);
  out.set(src.subarray(0, used));
  return out;
}

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
