import * as tf from '@tensorflow/tfjs';
import { KVCache } from '../kv-cache.ts';
import { ModelError } from '../model-config.ts';
import type { GPTModel } from '../model.ts';
import { DECODE_KERNEL_WASM } from './decode-kernel-wasm.ts';

/**
 * The host side of the decode kernel (decode-step.as.ts, WebAssembly SIMD): one kernel call per
 * decode step over the packed rows, every layer inside it, no read-back between layers.
 *
 * Memory: the kernel's linear memory holds the model's weights, repacked for the kernel (matrices
 * as panels of 8 columns), written when the weights change (a tfjs Variable's `assign` gives it
 * new data: checked by identity at each session, so the copy happens once per policy version),
 * then one session at a time: each row's KV cache (imported from its KVCache, exported back when
 * the caller keeps it) and the step's scratch. Memory grows as needed and is not returned.
 */

const PAGE = 65536;
/** Page 0 is the module's own (it declares no data, but its layout is its business). */
const BASE = PAGE;
/** A step with more new tokens runs as several kernel calls over consecutive rows (bounds the scratch). */
export const MAX_STEP_TOKENS = 4096;

// The model table's slots (decode-step.as.ts M_*).
const M_LAYERS = 20;
const LAYER_SLOTS = 12;
const ROW_INTS = 8;

interface KernelExports {
  memory: WebAssembly.Memory;
  step(
    model: number,
    rows: number,
    R: number,
    tokens: number,
    S: number,
    out: number,
    scratch: number,
    C: number,
  ): void;
  scratchBytes(model: number, S: number, R: number, C: number): number;
  weigh(logits: number, R: number, V: number, stride: number, out: number, invT: number): void;
}

let compiled: WebAssembly.Module | null = null;

function kernelModule(): WebAssembly.Module {
  if (!compiled) {
    const bin = atob(DECODE_KERNEL_WASM);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    compiled = new WebAssembly.Module(bytes);
  }
  return compiled;
}

const ceil8 = (n: number) => (n + 7) & ~7;
const align16 = (n: number) => (n + 15) & ~15;

/** A [K][N] matrix (row-major) as panels of 8 columns, [ceil8(N)/8][K][8], zero-padded. */
export function packPanels(w: Float32Array, K: number, N: number, out: Float32Array): void {
  const panels = ceil8(N) / 8;
  out.fill(0, 0, panels * K * 8);
  for (let p = 0; p < panels; p++) {
    for (let k = 0; k < K; k++) {
      const o = (p * K + k) * 8;
      for (let j = 0; j < 8 && p * 8 + j < N; j++) out[o + j] = w[k * N + p * 8 + j]!;
    }
  }
}

/** One row of a kernel step: new tokens for the row in session slot `slot`. */
export interface KernelRowStep {
  slot: number;
  tokens: readonly number[];
  /** The token before tokens[0] (for the token shift); none at the start of a sequence. */
  prevToken?: number;
}

export class KernelDecoder {
  private readonly exports: KernelExports;
  private readonly modelPtr = BASE;
  /** First byte after the weights: sessions start here. */
  private sessionBase = 0;
  private stamp: readonly object[] = [];
  private open = false;
  /** How many times the weights were copied in (once per policy version). */
  weightLoads = 0;

  private constructor(readonly model: GPTModel) {
    this.exports = new WebAssembly.Instance(kernelModule(), {}).exports as unknown as KernelExports;
  }

  private static readonly byModel = new WeakMap<GPTModel, KernelDecoder>();

  /** The model's decoder (one per model; its memory holds that model's weights). */
  static for(model: GPTModel): KernelDecoder {
    let d = KernelDecoder.byModel.get(model);
    if (!d) {
      d = new KernelDecoder(model);
      KernelDecoder.byModel.set(model, d);
    }
    return d;
  }

  /** Copies the weights in if they changed since the last copy (a no-op otherwise). */
  async prepare(): Promise<void> {
    const vars = this.model.namedWeights().map(([, v]) => v);
    const ids = vars.map((v) => v.dataId as object);
    if (ids.length === this.stamp.length && ids.every((id, i) => id === this.stamp[i])) return;
    const data = (await Promise.all(vars.map((v) => v.data()))) as Float32Array[];
    const byName = new Map(this.model.namedWeights().map(([name], i) => [name, data[i]!]));
    let rope: { cos: Float32Array; sin: Float32Array } | null = null;
    if (this.model.config.positions === 'rope') {
      const C = this.model.config.contextLength;
      const [cos, sin] = tf.tidy(() => {
        const r = this.model.ropeRows(tf.range(0, C, 1, 'int32') as tf.Tensor1D)!;
        return [r.cos, r.sin];
      });
      try {
        rope = { cos: (await cos!.data()) as Float32Array, sin: (await sin!.data()) as Float32Array };
      } finally {
        tf.dispose([cos!, sin!]);
      }
    }
    this.writeWeights(byName, rope);
    this.stamp = ids;
    this.weightLoads++;
  }

  private writeWeights(w: Map<string, Float32Array>, rope: { cos: Float32Array; sin: Float32Array } | null): void {
    const { vocabSize: V, dModel: d, nLayers: L, nHeads: H, dMlp: M, contextLength: C } = this.model.config;
    const copy = this.model.config.copyHead;
    const get = (name: string) => {
      const x = w.get(name);
      if (!x) throw new ModelError(`the model has no weight "${name}"`);
      return x;
    };
    // Lay out: the table, then each array 16-byte aligned.
    const tableBytes = align16((M_LAYERS + L * LAYER_SLOTS) * 4);
    let at = this.modelPtr + tableBytes;
    const place: Array<[number, (f: Float32Array) => void]> = [];
    const table = new Int32Array(M_LAYERS + L * LAYER_SLOTS);
    const put = (slotIndex: number, floats: number, fill: (f: Float32Array) => void) => {
      table[slotIndex] = at;
      place.push([at, fill]);
      at += align16(floats * 4);
    };
    const plain =
      (x: Float32Array, pad = x.length) =>
      (f: Float32Array) => {
        f.fill(0, 0, pad);
        f.set(x);
      };
    const packed = (x: Float32Array, K: number, N: number) => (f: Float32Array) => packPanels(x, K, N, f);
    table[0] = d;
    table[1] = H;
    table[2] = L;
    table[3] = M;
    table[4] = V;
    table[5] =
      (this.model.config.positions === 'rope' ? 1 : 0) |
      (this.model.config.tokenShift ? 2 : 0) |
      (this.model.config.positions === 'learned' ? 4 : 0) |
      (copy ? 8 : 0);
    const tok = get('tok_emb');
    put(6, V * d, plain(tok));
    const tokT = new Float32Array(d * V);
    for (let v = 0; v < V; v++) for (let c = 0; c < d; c++) tokT[c * V + v] = tok[v * d + c]!;
    put(7, ceil8(V) * d, packed(tokT, d, V));
    if (this.model.config.positions === 'learned') put(8, C * d, plain(get('pos_emb')));
    if (rope) {
      put(9, C * d, plain(rope.cos));
      put(10, C * d, plain(rope.sin));
    }
    if (this.model.config.tokenShift) put(11, d, plain(get('shift.gate')));
    put(12, d, plain(get('lnf.g')));
    put(13, d, plain(get('lnf.b')));
    if (copy) {
      put(14, ceil8(d) * d, packed(get('copy.wq'), d, d));
      put(15, ceil8(d) * d, packed(get('copy.wk'), d, d));
      put(16, d, plain(get('copy.gate.w')));
      put(17, 1, plain(get('copy.gate.b')));
    }
    for (let l = 0; l < L; l++) {
      const p = `h${l}.`;
      const s = M_LAYERS + l * LAYER_SLOTS;
      const q8 = ceil8(3 * d);
      const wqkv = new Float32Array(d * 3 * d);
      const [wq, wk, wv] = [get(p + 'attn.wq'), get(p + 'attn.wk'), get(p + 'attn.wv')];
      for (let k = 0; k < d; k++) {
        wqkv.set(wq.subarray(k * d, (k + 1) * d), k * 3 * d);
        wqkv.set(wk.subarray(k * d, (k + 1) * d), k * 3 * d + d);
        wqkv.set(wv.subarray(k * d, (k + 1) * d), k * 3 * d + 2 * d);
      }
      const bqkv = new Float32Array(q8);
      bqkv.set(get(p + 'attn.bq'), 0);
      bqkv.set(get(p + 'attn.bk'), d);
      bqkv.set(get(p + 'attn.bv'), 2 * d);
      put(s, d, plain(get(p + 'ln1.g')));
      put(s + 1, d, plain(get(p + 'ln1.b')));
      put(s + 2, q8 * d, packed(wqkv, d, 3 * d));
      put(s + 3, q8, plain(bqkv));
      put(s + 4, ceil8(d) * d, packed(get(p + 'attn.wo'), d, d));
      put(s + 5, ceil8(d), plain(get(p + 'attn.bo'), ceil8(d)));
      put(s + 6, d, plain(get(p + 'ln2.g')));
      put(s + 7, d, plain(get(p + 'ln2.b')));
      put(s + 8, ceil8(M) * d, packed(get(p + 'mlp.w1'), d, M));
      put(s + 9, ceil8(M), plain(get(p + 'mlp.b1'), ceil8(M)));
      put(s + 10, ceil8(d) * M, packed(get(p + 'mlp.w2'), M, d));
      put(s + 11, ceil8(d), plain(get(p + 'mlp.b2'), ceil8(d)));
    }
    this.ensure(at);
    const buf = this.exports.memory.buffer;
    new Int32Array(buf, this.modelPtr, table.length).set(table);
    for (let i = 0; i < place.length; i++) {
      const [start, fill] = place[i]!;
      const end = i + 1 < place.length ? place[i + 1]![0] : at;
      fill(new Float32Array(buf, start, (end - start) / 4));
    }
    this.sessionBase = align16(at);
  }

  /** Grows the memory to hold `end` bytes. */
  ensure(end: number): void {
    const mem = this.exports.memory;
    if (end <= mem.buffer.byteLength) return;
    const pages = Math.ceil((end - mem.buffer.byteLength) / PAGE);
    try {
      mem.grow(pages);
    } catch (error) {
      throw new ModelError(
        `the decode kernel needs ${(end / 2 ** 20).toFixed(0)} MiB of WebAssembly memory, more than it can have: ` +
          `${error instanceof Error ? error.message : String(error)} (use fewer rows per batch)`,
      );
    }
  }

  /**
   * Opens a session over rows, each with an optional cache (copied in) and room for `capacity`
   * positions in all. One session at a time: close it (synchronously, before any await) first.
   */
  session(rows: ReadonlyArray<{ cache?: KVCache; capacity: number }>): KernelSession {
    if (this.stamp.length === 0) throw new ModelError('the decode kernel has no weights yet: call prepare() first');
    if (this.open) throw new ModelError('a decode kernel session is already open on this model');
    this.open = true;
    try {
      return new KernelSession(this, this.exports, this.modelPtr, this.sessionBase, rows, () => {
        this.open = false;
      });
    } catch (error) {
      this.open = false;
      throw error;
    }
  }
}

/** One batch's rows in kernel memory: their caches and the steps' scratch. */
export class KernelSession {
  private readonly kv: number[] = [];
  private readonly caps: number[] = [];
  private readonly lengths: number[] = [];
  /** Logits then sampling weights, [rows][ceil8(V)] each. */
  private readonly outAt: number;
  private readonly weightsAt: number;
  private readonly end: number;
  private closed = false;
  /** Rows of the last step (its outputs' rows). */
  private lastRows = 0;
  private readonly d: number;
  private readonly L: number;
  private readonly copyWidth: number;
  private readonly V: number;
  private readonly C: number;

  constructor(
    private readonly decoder: KernelDecoder,
    private readonly k: KernelExports,
    private readonly modelPtr: number,
    base: number,
    rows: ReadonlyArray<{ cache?: KVCache; capacity: number }>,
    private readonly onClose: () => void,
  ) {
    const { dModel: d, nLayers: L, vocabSize: V, contextLength: C } = decoder.model.config;
    this.d = d;
    this.L = L;
    this.V = V;
    this.C = C;
    this.copyWidth = decoder.model.config.copyHead ? d : 0;
    let at = base;
    for (const r of rows) {
      const cap = Math.max(1, r.capacity);
      this.kv.push(at);
      this.caps.push(cap);
      this.lengths.push(0);
      at += align16(this.rowFloats(cap) * 4 + cap * 4);
    }
    const outBytes = rows.length * ceil8(V) * 4;
    this.outAt = align16(at);
    this.weightsAt = this.outAt + align16(outBytes);
    this.end = this.weightsAt + align16(outBytes);
    decoder.ensure(this.end);
    rows.forEach((r, i) => {
      if (r.cache) this.importCache(i, r.cache);
    });
  }

  private rowFloats(cap: number): number {
    return cap * (2 * this.L * this.d + this.copyWidth);
  }

  /** The cache's positions into slot i. */
  private importCache(i: number, c: KVCache): void {
    const { d, L } = this;
    if (c.layers !== L || c.width !== d || c.copyWidth !== this.copyWidth) {
      throw new ModelError(`row ${i}: the cache is for another model shape`);
    }
    const cap = this.caps[i]!;
    if (c.length > cap) throw new ModelError(`row ${i}: its cache holds ${c.length} positions, more than ${cap}`);
    const n = c.length;
    const f = new Float32Array(this.k.memory.buffer, this.kv[i]!, this.rowFloats(cap));
    for (let l = 0; l < L; l++) {
      f.set(c.k[l]!.subarray(0, n * d), 2 * l * cap * d);
      f.set(c.v[l]!.subarray(0, n * d), (2 * l + 1) * cap * d);
    }
    if (this.copyWidth) f.set(c.copyKeys.subarray(0, n * d), 2 * L * cap * d);
    new Int32Array(this.k.memory.buffer, this.kv[i]! + this.rowFloats(cap) * 4, cap).set(c.ids.subarray(0, n));
    this.lengths[i] = n;
  }

  /** Positions slot i holds. */
  length(i: number): number {
    return this.lengths[i]!;
  }

  /** Slot i's keys/values as a KVCache of its own (room for `extra` more positions). */
  exportCache(i: number, extra = 0): KVCache {
    const { d, L } = this;
    const n = this.lengths[i]!;
    const out = new KVCache(L, d, n + Math.max(1, extra), this.copyWidth);
    this.writeCache(i, out);
    return out;
  }

  /** Writes slot i's positions into `c` (which grows to hold them). */
  writeCache(i: number, c: KVCache): void {
    const { d, L } = this;
    const n = this.lengths[i]!;
    const cap = this.caps[i]!;
    c.length = 0;
    c.reserve(n);
    const f = new Float32Array(this.k.memory.buffer, this.kv[i]!, this.rowFloats(cap));
    for (let l = 0; l < L; l++) {
      c.k[l]!.set(f.subarray(2 * l * cap * d, (2 * l * cap + n) * d));
      c.v[l]!.set(f.subarray((2 * l + 1) * cap * d, ((2 * l + 1) * cap + n) * d));
    }
    if (this.copyWidth) c.copyKeys.set(f.subarray(2 * L * cap * d, (2 * L * cap + n) * d));
    c.ids.set(new Int32Array(this.k.memory.buffer, this.kv[i]! + this.rowFloats(cap) * 4, n));
    c.length = n;
  }

  /**
   * Feeds each row's new tokens on top of its slot's positions; returns the next-token logits of
   * each row's last new token (log-probabilities with a copy head), one array of V per row: views
   * of the kernel's memory, valid until the next step or the session's end.
   */
  step(rows: readonly KernelRowStep[]): Float32Array[] {
    if (this.closed) throw new ModelError('the decode kernel session is closed');
    const { V, C } = this;
    const seen = new Set<number>();
    rows.forEach((r, i) => {
      if (!(Number.isInteger(r.slot) && r.slot >= 0 && r.slot < this.caps.length)) {
        throw new ModelError(`row ${i}: the session has no slot ${r.slot}`);
      }
      if (seen.has(r.slot)) throw new ModelError(`a step names slot ${r.slot} twice`);
      seen.add(r.slot);
      const n = r.tokens.length;
      if (n === 0) throw new ModelError(`row ${i} has no new tokens`);
      const start = this.lengths[r.slot]!;
      if (start + n > C) throw new ModelError(`row ${i}: ${start + n} tokens exceed the context (${C})`);
      if (start + n > this.caps[r.slot]!) {
        throw new ModelError(`row ${i}: ${start + n} positions exceed its room (${this.caps[r.slot]})`);
      }
      const bad = (t: number) => !Number.isInteger(t) || t < 0 || t >= V;
      const wrong = r.tokens.find(bad) ?? (r.prevToken !== undefined && bad(r.prevToken) ? r.prevToken : undefined);
      if (wrong !== undefined) throw new ModelError(`row ${i}: token id ${wrong} is not in [0, ${V})`);
    });
    if (rows.length > this.caps.length)
      throw new ModelError(`a step of ${rows.length} rows in a session of ${this.caps.length}`);
    for (let from = 0; from < rows.length; ) {
      let to = from + 1;
      let S = rows[from]!.tokens.length;
      while (to < rows.length && S + rows[to]!.tokens.length <= MAX_STEP_TOKENS) S += rows[to++]!.tokens.length;
      this.run(rows.slice(from, to), S, from);
      from = to;
    }
    this.lastRows = rows.length;
    return this.views(this.outAt);
  }

  /**
   * Sampling weights of the last step's rows at a temperature: exp((logit − max) / temperature),
   * one array of V per row (views, like step's).
   */
  weights(temperature: number): Float32Array[] {
    const V8 = ceil8(this.V);
    this.k.weigh(this.outAt, this.lastRows, this.V, V8, this.weightsAt, temperature > 0 ? 1 / temperature : 1);
    return this.views(this.weightsAt);
  }

  private views(at: number): Float32Array[] {
    const V8 = ceil8(this.V);
    const all = new Float32Array(this.k.memory.buffer, at, this.lastRows * V8);
    return Array.from({ length: this.lastRows }, (_, i) => all.subarray(i * V8, i * V8 + this.V));
  }

  private run(rows: readonly KernelRowStep[], S: number, first: number): void {
    const R = rows.length;
    const tableAt = this.end;
    const tokensAt = tableAt + align16(R * ROW_INTS * 4);
    const scratchAt = tokensAt + align16(S * 4);
    this.decoder.ensure(scratchAt + this.k.scratchBytes(this.modelPtr, S, R, this.C));
    const buf = this.k.memory.buffer;
    const table = new Int32Array(buf, tableAt, R * ROW_INTS);
    const tokens = new Int32Array(buf, tokensAt, S);
    let off = 0;
    rows.forEach((r, i) => {
      const o = i * ROW_INTS;
      table[o] = r.tokens.length;
      table[o + 1] = this.lengths[r.slot]!;
      table[o + 2] = r.prevToken ?? -1;
      table[o + 3] = this.caps[r.slot]!;
      table[o + 4] = this.kv[r.slot]!;
      table[o + 5] = off;
      tokens.set(r.tokens, off);
      off += r.tokens.length;
    });
    const out = this.outAt + first * ceil8(this.V) * 4;
    this.k.step(this.modelPtr, tableAt, R, tokensAt, S, out, scratchAt, this.C);
    for (const r of rows) this.lengths[r.slot] = this.lengths[r.slot]! + r.tokens.length;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}
