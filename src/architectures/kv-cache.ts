/**
 * One sequence's keys and values, per layer, in plain Float32Arrays ([T, width] row-major, heads side
 * by side; width = key/value heads × head size): what an episode keeps between turns. The GPT's
 * tensors decoder (src/architectures/gpt/decode.ts) attends on them in JS (one query row in a few
 * microseconds, while a tfjs kernel call costs tens, and a row's arithmetic then depends on that row
 * alone: bit-identical in any batch); a decode kernel copies them into its memory, in the same
 * layout, for a call. Appends grow the buffers by doubling.
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
