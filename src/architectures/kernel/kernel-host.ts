import { availableParallelism } from 'node:os';
import { AgentR1Error } from '../../core/errors.ts';
import { KVCache } from '../kv-cache.ts';

/**
 * The host side of a decode kernel (one WebAssembly SIMD call per decode step over the packed rows,
 * every layer inside it, no read-back between layers): its instance and memory, and the sessions
 * that hold a batch's rows. What is particular to an architecture (how its weights are laid out in
 * the kernel's memory) is the subclass's; the rows, their KV caches and the steps are the same for
 * every kernel.
 *
 * Memory: the kernel's linear memory holds the model's weights, written by the subclass when they
 * change, then one session at a time: each row's KV cache (imported from its KVCache, exported back
 * when the caller keeps it) and the step's scratch. Memory grows as needed and is not returned.
 */

const PAGE = 65536;
/** Page 0 is the module's own (it declares no data, but its layout is its business). */
export const KERNEL_BASE = PAGE;
/** A step with more new tokens runs as several kernel calls over consecutive rows (bounds the scratch). */
export const MAX_STEP_TOKENS = 4096;
/** i32 slots a row of the step's table takes (kernel/rows.as.ts reads them). */
const ROW_INTS = 8;

/** A kernel's refusal or failure: a bad step, a shape that does not match, memory it cannot have. */
export class KernelError extends AgentR1Error {}

/** What every decode kernel exports (a threaded kernel's step and scratchBytes take more: its subclass calls them). */
export interface KernelExports {
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
    ...more: number[]
  ): void;
  scratchBytes(model: number, S: number, R: number, C: number, ...more: number[]): number;
  weigh(logits: number, R: number, V: number, stride: number, out: number, invT: number): void;
}

/** The sizes a session needs: a cache row's layout, the vocabulary, the context. */
export interface KernelShape {
  layers: number;
  /** Floats per position of one layer's keys (and of its values). */
  width: number;
  /** Floats per position of copy keys (the GPT's copy head; 0 otherwise). */
  copyWidth: number;
  vocabSize: number;
  contextLength: number;
}

/** One row of a kernel step: new tokens for the row in session slot `slot`. */
export interface KernelRowStep {
  slot: number;
  tokens: readonly number[];
  /** The token before tokens[0] (the GPT's token shift); none at the start of a sequence. */
  prevToken?: number;
}

const modules = new Map<string, WebAssembly.Module>();

/** The compiled module of a kernel's base64 bytes (compiled once per process). */
function kernelModule(base64: string): WebAssembly.Module {
  let m = modules.get(base64);
  if (!m) {
    m = new WebAssembly.Module(Uint8Array.from(Buffer.from(base64, 'base64')));
    modules.set(base64, m);
  }
  return m;
}

/** Threads a kernel call runs on unless told otherwise: AGENT_R1_KERNEL_THREADS, else one per core (at most 8). */
export function kernelThreads(): number {
  const env = Number(process.env.AGENT_R1_KERNEL_THREADS);
  return Number.isInteger(env) && env >= 1 ? Math.min(env, 64) : Math.min(availableParallelism(), 8);
}

export const ceil8 = (n: number) => (n + 7) & ~7;
/** Addresses pass 2^31 in a model of a few GB: rounded in floating point, not with 32-bit bit operations. */
export const align16 = (n: number) => Math.ceil(n / 16) * 16;

/**
 * How a kernel's model is laid out: `put(slot, floats, fill)` (or, for 16-bit values,
 * `put16(slot, halves, fill)`) places an array 16-byte aligned after the table, notes its address in
 * the table's slot, and fills it once the memory holds them all.
 */
export type ModelLayout = (
  table: Int32Array,
  put: (slot: number, floats: number, fill: (f: Float32Array) => void) => void,
  put16: (slot: number, halves: number, fill: (u: Uint16Array) => void) => void,
) => void;

/** A laid-out array: its address, length, element size and filler. */
export interface LaidArray {
  slot: number;
  at: number;
  count: number;
  halves: boolean;
  fill: ((f: Float32Array) => void) | ((u: Uint16Array) => void);
}

/**
 * The model table (`slots` i32 at `base`) and each array's place, without touching memory: what
 * writeModel writes, and where a loader may read weights to before the kernel exists.
 */
export function layModel(
  base: number,
  slots: number,
  lay: ModelLayout,
): { table: Int32Array; end: number; arrays: LaidArray[] } {
  const table = new Int32Array(slots);
  let at = base + align16(slots * 4);
  const arrays: LaidArray[] = [];
  const place = (slot: number, count: number, halves: boolean, fill: LaidArray['fill']) => {
    table[slot] = at;
    arrays.push({ slot, at, count, halves, fill });
    at += align16(count * (halves ? 2 : 4));
  };
  lay(
    table,
    (slot, floats, fill) => place(slot, floats, false, fill),
    (slot, halves, fill) => place(slot, halves, true, fill),
  );
  return { table, end: at, arrays };
}

/**
 * One WebAssembly memory of a kernel and this thread's instance on it. A model too big for one
 * memory (4 GiB) is split by layers: each part holds its layers' weights and their caches, and a
 * step runs the parts in turn, the residual stream handed from one to the next.
 */
export interface KernelPart {
  readonly exports: KernelExports;
  /** Its layers: [firstLayer, firstLayer + layers). */
  readonly firstLayer: number;
  readonly layers: number;
  /** First byte after its weights: sessions start here (0: no weights yet). */
  sessionBase: number;
}

/** Where one part's copy of a step's rows table, tokens and scratch are. */
export interface PartStep {
  rows: number;
  tokens: number;
  scratch: number;
}

export abstract class KernelHost {
  protected readonly modelPtr = KERNEL_BASE;
  /** The memories, in layer order (one unless the model was split). */
  protected parts: KernelPart[];
  private open = false;

  protected readonly module: WebAssembly.Module;

  protected constructor(
    wasm: string,
    readonly shape: KernelShape,
    /** A memory to run in (a threaded kernel's, shared), instead of the kernel's own. */
    memory?: WebAssembly.Memory,
  ) {
    this.module = kernelModule(wasm);
    this.parts = [{ exports: this.instantiate(memory), firstLayer: 0, layers: shape.layers, sessionBase: 0 }];
  }

  /** An instance of the kernel on this thread, over `memory` (else its own). */
  protected instantiate(memory?: WebAssembly.Memory): KernelExports {
    const imports: WebAssembly.Imports = memory ? { env: { memory } } : {};
    return new WebAssembly.Instance(this.module, imports).exports as unknown as KernelExports;
  }

  /** The first part's instance (a model in one memory: its only one). */
  protected get exports(): KernelExports {
    return this.parts[0]!.exports;
  }

  /** The memories' parts, in layer order. */
  get memoryParts(): readonly KernelPart[] {
    return this.parts;
  }

  /** Bytes of scratch a step of S tokens over R rows needs in part p. */
  stepScratch(S: number, R: number, p = 0): number {
    return this.parts[p]!.exports.scratchBytes(this.modelPtr, S, R, this.shape.contextLength);
  }

  /**
   * Runs one kernel step: each part's copy of the rows' table and tokens is written (its caches its
   * own); the logits go to `out` in the last part.
   */
  runStep(steps: readonly PartStep[], R: number, S: number, out: number): void {
    const [one] = steps;
    this.exports.step(this.modelPtr, one!.rows, R, one!.tokens, S, out, one!.scratch, this.shape.contextLength);
  }

  /** The first part's memory (views of it are valid until it grows). */
  get memory(): WebAssembly.Memory {
    return this.exports.memory;
  }

  /**
   * Writes the model into part p's memory (laid out by layModel) and fills each array, except one
   * that already holds its values in place (a weight loaded straight into this memory).
   */
  protected writeModel(slots: number, lay: ModelLayout, p = 0): void {
    const part = this.parts[p]!;
    const { table, end, arrays } = layModel(this.modelPtr, slots, lay);
    this.ensure(end, p);
    const buf = part.exports.memory.buffer;
    new Int32Array(buf, this.modelPtr, slots).set(table);
    for (const a of arrays) {
      const view = a.halves ? new Uint16Array(buf, a.at, a.count) : new Float32Array(buf, a.at, a.count);
      (a.fill as (f: Float32Array | Uint16Array) => void)(view);
    }
    part.sessionBase = align16(end);
  }

  /** Grows part p's memory to hold `end` bytes. */
  ensure(end: number, p = 0): void {
    const mem = this.parts[p]!.exports.memory;
    if (end <= mem.buffer.byteLength) return;
    const pages = Math.ceil((end - mem.buffer.byteLength) / PAGE);
    try {
      mem.grow(pages);
    } catch (error) {
      throw new KernelError(
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
    if (this.parts.some((p) => p.sessionBase === 0))
      throw new KernelError('the decode kernel has no weights yet: call prepare() first');
    if (this.open) throw new KernelError('a decode kernel session is already open on this model');
    this.open = true;
    try {
      return new KernelSession(this, this.parts, rows, () => {
        this.open = false;
      });
    } catch (error) {
      this.open = false;
      throw error;
    }
  }
}

/**
 * One batch's rows in kernel memory: their caches (in each part, its layers') and the steps' scratch;
 * the logits and sampling weights in the last part.
 */
export class KernelSession {
  /** kv[p][slot]: the slot's cache in part p. */
  private readonly kv: number[][];
  private readonly caps: number[] = [];
  private readonly lengths: number[] = [];
  /** Logits then sampling weights, [rows][ceil8(V)] each, in the last part. */
  private readonly outAt: number;
  private readonly weightsAt: number;
  /** Each part's first byte after the session's rows (the last part's: after the outputs). */
  private readonly ends: number[];
  private readonly last: KernelExports;
  private closed = false;
  /** Rows of the last step (its outputs' rows). */
  private lastRows = 0;

  constructor(
    private readonly host: KernelHost,
    private readonly parts: readonly KernelPart[],
    rows: ReadonlyArray<{ cache?: KVCache; capacity: number }>,
    private readonly onClose: () => void,
  ) {
    const V = host.shape.vocabSize;
    for (const r of rows) {
      const cap = Math.max(1, r.capacity);
      this.caps.push(cap);
      this.lengths.push(0);
    }
    this.kv = [];
    this.ends = parts.map((part) => {
      let at = part.sessionBase;
      this.kv.push(
        this.caps.map((cap) => {
          const start = at;
          at += align16(this.rowFloats(cap, part) * 4 + cap * 4);
          return start;
        }),
      );
      return at;
    });
    const lastP = parts.length - 1;
    this.last = parts[lastP]!.exports;
    const outBytes = rows.length * ceil8(V) * 4;
    this.outAt = align16(this.ends[lastP]!);
    this.weightsAt = this.outAt + align16(outBytes);
    this.ends[lastP] = this.weightsAt + align16(outBytes);
    parts.forEach((_, p) => host.ensure(this.ends[p]!, p));
    rows.forEach((r, i) => {
      if (r.cache) this.importCache(i, r.cache);
    });
  }

  /** Floats of a row's cache in a part: keys and values of its layers (and the copy keys). */
  private rowFloats(cap: number, part: KernelPart): number {
    const { width, copyWidth } = this.host.shape;
    return cap * (2 * part.layers * width + copyWidth);
  }

  /** Row i's cache in part p as floats, then its ids (in every part; the last part's are kept). */
  private cacheOf(p: number, i: number): { f: Float32Array; ids: Int32Array } {
    const part = this.parts[p]!;
    const cap = this.caps[i]!;
    const floats = this.rowFloats(cap, part);
    const buf = part.exports.memory.buffer;
    return {
      f: new Float32Array(buf, this.kv[p]![i]!, floats),
      ids: new Int32Array(buf, this.kv[p]![i]! + floats * 4, cap),
    };
  }

  /** The cache's positions into slot i. */
  private importCache(i: number, c: KVCache): void {
    const { layers: L, width: w, copyWidth } = this.host.shape;
    if (c.layers !== L || c.width !== w || c.copyWidth !== copyWidth) {
      throw new KernelError(`row ${i}: the cache is for another model shape`);
    }
    const cap = this.caps[i]!;
    if (c.length > cap) throw new KernelError(`row ${i}: its cache holds ${c.length} positions, more than ${cap}`);
    const n = c.length;
    this.parts.forEach((part, p) => {
      const { f, ids } = this.cacheOf(p, i);
      for (let j = 0; j < part.layers; j++) {
        const l = part.firstLayer + j;
        f.set(c.k[l]!.subarray(0, n * w), 2 * j * cap * w);
        f.set(c.v[l]!.subarray(0, n * w), (2 * j + 1) * cap * w);
      }
      if (copyWidth) f.set(c.copyKeys.subarray(0, n * copyWidth), 2 * part.layers * cap * w);
      ids.set(c.ids.subarray(0, n));
    });
    this.lengths[i] = n;
  }

  /** Positions slot i holds. */
  length(i: number): number {
    return this.lengths[i]!;
  }

  /** Slot i's keys/values as a KVCache of its own (room for `extra` more positions). */
  exportCache(i: number, extra = 0): KVCache {
    const { layers, width, copyWidth } = this.host.shape;
    const out = new KVCache(layers, width, this.lengths[i]! + Math.max(1, extra), copyWidth);
    this.writeCache(i, out);
    return out;
  }

  /** Writes slot i's positions into `c` (which grows to hold them). */
  writeCache(i: number, c: KVCache): void {
    const { width: w, copyWidth } = this.host.shape;
    const n = this.lengths[i]!;
    const cap = this.caps[i]!;
    c.length = 0;
    c.reserve(n);
    this.parts.forEach((part, p) => {
      const { f } = this.cacheOf(p, i);
      for (let j = 0; j < part.layers; j++) {
        const l = part.firstLayer + j;
        c.k[l]!.set(f.subarray(2 * j * cap * w, (2 * j * cap + n) * w));
        c.v[l]!.set(f.subarray((2 * j + 1) * cap * w, ((2 * j + 1) * cap + n) * w));
      }
      if (copyWidth && p === this.parts.length - 1)
        c.copyKeys.set(f.subarray(2 * part.layers * cap * w, 2 * part.layers * cap * w + n * copyWidth));
    });
    c.ids.set(this.cacheOf(this.parts.length - 1, i).ids.subarray(0, n));
    c.length = n;
  }

  /**
   * Feeds each row's new tokens on top of its slot's positions; returns the next-token logits of
   * each row's last new token (log-probabilities with a copy head), one array of V per row: views
   * of the kernel's memory, valid until the next step or the session's end.
   */
  step(rows: readonly KernelRowStep[]): Float32Array[] {
    if (this.closed) throw new KernelError('the decode kernel session is closed');
    const { vocabSize: V, contextLength: C } = this.host.shape;
    const seen = new Set<number>();
    rows.forEach((r, i) => {
      if (!(Number.isInteger(r.slot) && r.slot >= 0 && r.slot < this.caps.length)) {
        throw new KernelError(`row ${i}: the session has no slot ${r.slot}`);
      }
      if (seen.has(r.slot)) throw new KernelError(`a step names slot ${r.slot} twice`);
      seen.add(r.slot);
      const n = r.tokens.length;
      if (n === 0) throw new KernelError(`row ${i} has no new tokens`);
      const start = this.lengths[r.slot]!;
      if (start + n > C) throw new KernelError(`row ${i}: ${start + n} tokens exceed the context (${C})`);
      if (start + n > this.caps[r.slot]!) {
        throw new KernelError(`row ${i}: ${start + n} positions exceed its room (${this.caps[r.slot]})`);
      }
      const bad = (t: number) => !Number.isInteger(t) || t < 0 || t >= V;
      const wrong = r.tokens.find(bad) ?? (r.prevToken !== undefined && bad(r.prevToken) ? r.prevToken : undefined);
      if (wrong !== undefined) throw new KernelError(`row ${i}: token id ${wrong} is not in [0, ${V})`);
    });
    if (rows.length > this.caps.length)
      throw new KernelError(`a step of ${rows.length} rows in a session of ${this.caps.length}`);
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
    const V = this.host.shape.vocabSize;
    this.last.weigh(this.outAt, this.lastRows, V, ceil8(V), this.weightsAt, temperature > 0 ? 1 / temperature : 1);
    return this.views(this.weightsAt);
  }

  private views(at: number): Float32Array[] {
    const V = this.host.shape.vocabSize;
    const V8 = ceil8(V);
    const all = new Float32Array(this.last.memory.buffer, at, this.lastRows * V8);
    return Array.from({ length: this.lastRows }, (_, i) => all.subarray(i * V8, i * V8 + V));
  }

  private run(rows: readonly KernelRowStep[], S: number, first: number): void {
    const R = rows.length;
    const steps = this.parts.map((part, p): PartStep => {
      const tableAt = this.ends[p]!;
      const tokensAt = tableAt + align16(R * ROW_INTS * 4);
      const scratchAt = tokensAt + align16(S * 4);
      this.host.ensure(scratchAt + this.host.stepScratch(S, R, p), p);
      const buf = part.exports.memory.buffer;
      const table = new Int32Array(buf, tableAt, R * ROW_INTS);
      const tokens = new Int32Array(buf, tokensAt, S);
      let off = 0;
      rows.forEach((r, i) => {
        const o = i * ROW_INTS;
        table[o] = r.tokens.length;
        table[o + 1] = this.lengths[r.slot]!;
        table[o + 2] = r.prevToken ?? -1;
        table[o + 3] = this.caps[r.slot]!;
        table[o + 4] = this.kv[p]![r.slot]!;
        table[o + 5] = off;
        tokens.set(r.tokens, off);
        off += r.tokens.length;
      });
      return { rows: tableAt, tokens: tokensAt, scratch: scratchAt };
    });
    const out = this.outAt + first * ceil8(this.host.shape.vocabSize) * 4;
    this.host.runStep(steps, R, S, out);
    for (const r of rows) this.lengths[r.slot] = this.lengths[r.slot]! + r.tokens.length;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}
