import { Worker } from 'node:worker_threads';
import { toFloat32 } from '../../formats/dtype.ts';
import { KERNEL_BASE, KernelError, align16, kernelThreads } from './kernel-host.ts';
import { LINEAR_WASM } from './linear-wasm.ts';

/**
 * The host of the linear kernel (linear.as.ts): a frozen model's matrices kept in their checkpoint's
 * element type, outside the tensor backend's heap, each with its transposed copy, so that a training
 * step's products with them, out = x·Wᵀ forward and dx = dy·W backward, run on every core. The
 * matrices are spread over as many WebAssembly memories as they need (each at most 4 GiB; a model
 * past that is split between them, matrix by matrix); each memory has its own instance and workers.
 * Inputs and outputs are copied in and out per call. Results are the same bits for any number of threads.
 */

/** A matrix's element type as the checkpoint stores it. */
export type MatrixFormat = 'F32' | 'BF16' | 'F16';

/** A matrix to keep: [rows][cols] row-major; 16-bit formats as their raw bits. */
export interface LinearMatrix {
  name: string;
  rows: number;
  cols: number;
  format: MatrixFormat;
  values: Float32Array | Uint16Array;
}

const FORMAT_CODE: Record<MatrixFormat, number> = { F32: 0, BF16: 1, F16: 2 };
const PAGE = 65536;
const MAX_PAGES = 65536;
/** Matrices per memory at most: the rest of its 4 GiB is left to the calls' inputs and outputs. */
const MATRIX_BYTES_PER_MEMORY = 3.5 * 2 ** 30;
// The control block in page 0: i32 slots 0–9 a call's arguments, then generation and stop; the barrier after it.
const CTL = KERNEL_BASE - 256;
const SYNC = CTL + 64;
const C_GEN = 10;
const C_STOP = 11;

const WORKER = `
const { workerData } = require('node:worker_threads');
const { module, memory, ctl, thread, generation } = workerData;
const k = new WebAssembly.Instance(module, { env: { memory } }).exports;
const c = new Int32Array(memory.buffer, ctl, 16);
for (let seen = generation; ; ) {
  Atomics.wait(c, ${C_GEN}, seen);
  seen = Atomics.load(c, ${C_GEN});
  if (Atomics.load(c, ${C_STOP})) break;
  k.apply(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], thread, c[8], c[9]);
}
`;

interface LinearExports {
  apply(
    x: number,
    S: number,
    K: number,
    w: number,
    N: number,
    out: number,
    format: number,
    wide: number,
    t: number,
    T: number,
    sync: number,
  ): void;
}

/** One memory: its instance, its workers (started on the first call) and the bytes its matrices take. */
interface Part {
  memory: WebAssembly.Memory;
  exports: LinearExports;
  workers: Worker[] | null;
  end: number;
}

interface Placed {
  part: Part;
  rows: number;
  cols: number;
  format: MatrixFormat;
  /** W [rows][cols] and Wᵀ [cols][rows]. */
  at: number;
  atT: number;
}

let module: WebAssembly.Module | null = null;

function stop(parts: Part[]): void {
  for (const p of parts) {
    if (!p.workers) continue;
    const c = new Int32Array(p.memory.buffer, CTL, 16);
    Atomics.store(c, C_STOP, 1);
    Atomics.add(c, C_GEN, 1);
    Atomics.notify(c, C_GEN);
    p.workers = null;
  }
}

/** Stops a kernel's workers once the kernel itself is gone (dispose() does it sooner). */
const stopWorkers = new FinalizationRegistry<Part[]>(stop);

const elementBytes = (f: MatrixFormat) => (f === 'F32' ? 4 : 2);

/** A [rows][cols] array's transpose, in tiles (both arrays are walked a cache line at a time). */
function transpose<A extends Float32Array | Uint16Array>(a: A, rows: number, cols: number, out: A): void {
  const TILE = 64;
  for (let r0 = 0; r0 < rows; r0 += TILE)
    for (let c0 = 0; c0 < cols; c0 += TILE) {
      const r1 = Math.min(rows, r0 + TILE);
      const c1 = Math.min(cols, c0 + TILE);
      for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) out[c * rows + r] = a[r * cols + c]!;
    }
}

export class LinearKernel {
  readonly threads: number;
  private readonly parts: Part[] = [];
  private readonly placed = new Map<string, Placed>();

  constructor(
    matrices: readonly LinearMatrix[],
    options: {
      threads?: number;
      /** Bytes of matrices (with their transposes) one memory takes at most (default 3.5 GiB; tests split smaller sets). */
      bytesPerMemory?: number;
    } = {},
  ) {
    this.threads = options.threads ?? kernelThreads();
    const cap = Math.min(options.bytesPerMemory ?? MATRIX_BYTES_PER_MEMORY, MATRIX_BYTES_PER_MEMORY);
    module ??= new WebAssembly.Module(Uint8Array.from(Buffer.from(LINEAR_WASM, 'base64')));
    // Place every matrix (and its transpose) first, then make each memory once at its size.
    const plan: { m: LinearMatrix; part: number; at: number; atT: number }[] = [];
    const ends: number[] = [];
    for (const m of matrices) {
      if (this.placed.has(m.name) || plan.some((p) => p.m.name === m.name))
        throw new KernelError(`the linear kernel is given ${m.name} twice`);
      if (m.values.length !== m.rows * m.cols)
        throw new KernelError(`${m.name}: ${m.values.length} values for a [${m.rows}, ${m.cols}] matrix`);
      if ((m.format === 'F32') !== m.values instanceof Float32Array)
        throw new KernelError(
          `${m.name}: ${m.format} values must come as ${m.format === 'F32' ? 'float32' : '16-bit'} bits`,
        );
      const bytes = align16(m.rows * m.cols * elementBytes(m.format));
      if (2 * bytes > cap)
        throw new KernelError(
          `${m.name} (${(bytes / 2 ** 20).toFixed(1)} MiB) and its transpose do not fit a WebAssembly memory`,
        );
      let part = ends.length - 1;
      if (part < 0 || ends[part]! + 2 * bytes > cap + KERNEL_BASE) {
        ends.push(KERNEL_BASE);
        part++;
      }
      const at = ends[part]!;
      plan.push({ m, part, at, atT: at + bytes });
      ends[part] = at + 2 * bytes;
    }
    for (const end of ends) {
      const memory = new WebAssembly.Memory({ initial: Math.ceil(end / PAGE), maximum: MAX_PAGES, shared: true });
      const exports = new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as LinearExports;
      this.parts.push({ memory, exports, workers: null, end });
    }
    for (const { m, part, at, atT } of plan) {
      const p = this.parts[part]!;
      const n = m.rows * m.cols;
      if (m.format === 'F32') {
        new Float32Array(p.memory.buffer, at, n).set(m.values);
        transpose(m.values as Float32Array, m.rows, m.cols, new Float32Array(p.memory.buffer, atT, n));
      } else {
        new Uint16Array(p.memory.buffer, at, n).set(m.values);
        transpose(m.values as Uint16Array, m.rows, m.cols, new Uint16Array(p.memory.buffer, atT, n));
      }
      this.placed.set(m.name, { part: p, rows: m.rows, cols: m.cols, format: m.format, at, atT });
    }
    stopWorkers.register(this, this.parts, this);
  }

  /** WebAssembly memories the matrices take (more than one past 3.5 GiB of them with their transposes). */
  get memories(): number {
    return this.parts.length;
  }

  /** Bytes the kernel's memories hold now. */
  get bytes(): number {
    return this.parts.reduce((n, p) => n + p.memory.buffer.byteLength, 0);
  }

  has(name: string): boolean {
    return this.placed.has(name);
  }

  /** A matrix's shape [rows, cols]. */
  shape(name: string): [number, number] {
    const m = this.matrix(name);
    return [m.rows, m.cols];
  }

  /** A matrix's values as float32 (widened exactly from 16 bits). */
  values(name: string): Float32Array {
    const m = this.matrix(name);
    const n = m.rows * m.cols;
    if (m.format === 'F32') return new Float32Array(m.part.memory.buffer, m.at, n).slice();
    return toFloat32(new Uint8Array(m.part.memory.buffer, m.at, 2 * n).slice(), m.format);
  }

  /**
   * x [S][cols]·Wᵀ → [S][rows] (`transposed`: dy [S][rows]·W → [S][cols], the backward pass to a
   * forward's inputs).
   */
  apply(name: string, x: Float32Array, S: number, transposed = false): Float32Array {
    const m = this.matrix(name);
    const [K, N] = transposed ? [m.rows, m.cols] : [m.cols, m.rows];
    if (!(Number.isInteger(S) && S >= 0) || x.length !== S * K)
      throw new KernelError(`${name}: ${x.length} inputs are not ${S} rows of ${K}`);
    const p = m.part;
    const xAt = align16(p.end);
    const outAt = align16(xAt + S * K * 4);
    // Each thread's room to widen 4 columns of a 16-bit matrix (linear.as.ts).
    const wideAt = align16(outAt + S * N * 4);
    this.reserve(p, wideAt + (m.format === 'F32' ? 0 : this.threads * 16 * K));
    new Float32Array(p.memory.buffer, xAt, S * K).set(x);
    this.run(p, [xAt, S, K, transposed ? m.atT : m.at, N, outAt, FORMAT_CODE[m.format], wideAt]);
    return new Float32Array(p.memory.buffer, outAt, S * N).slice();
  }

  /**
   * Rewrites a float32 matrix (and its transpose) with new values: a trained projection mirrored
   * here after an update.
   */
  set(name: string, values: Float32Array): void {
    const m = this.matrix(name);
    if (m.format !== 'F32') throw new KernelError(`${name} is kept as ${m.format}; only a float32 matrix is rewritten`);
    const n = m.rows * m.cols;
    if (values.length !== n)
      throw new KernelError(`${name}: ${values.length} values for a [${m.rows}, ${m.cols}] matrix`);
    new Float32Array(m.part.memory.buffer, m.at, n).set(values);
    transpose(values, m.rows, m.cols, new Float32Array(m.part.memory.buffer, m.atT, n));
  }

  /**
   * The gradient of x·Wᵀ with respect to W: dyᵀ·x [N][K] for dy [S][N] and x [S][K], on every core
   * (the same dot products as apply, over the S rows, in the first memory's free space).
   */
  outer(dy: Float32Array, x: Float32Array, S: number, N: number, K: number): Float32Array {
    if (!(Number.isInteger(S) && S >= 0) || dy.length !== S * N || x.length !== S * K)
      throw new KernelError(`outer product: ${dy.length} and ${x.length} values are not ${S} rows of ${N} and of ${K}`);
    const p = this.parts[0]!;
    const aAt = align16(p.end);
    const bAt = align16(aAt + N * S * 4);
    const outAt = align16(bAt + K * S * 4);
    this.reserve(p, outAt + N * K * 4);
    transpose(dy, S, N, new Float32Array(p.memory.buffer, aAt, N * S));
    transpose(x, S, K, new Float32Array(p.memory.buffer, bAt, K * S));
    this.run(p, [aAt, N, S, bAt, K, outAt, FORMAT_CODE.F32, 0]);
    return new Float32Array(p.memory.buffer, outAt, N * K).slice();
  }

  /** Stops the workers (the kernel cannot be used after). */
  dispose(): void {
    stop(this.parts);
    stopWorkers.unregister(this);
    this.placed.clear();
  }

  /** Grows a memory to hold `end` bytes (a call's inputs and outputs after its matrices). */
  private reserve(p: Part, end: number): void {
    if (end <= p.memory.buffer.byteLength) return;
    const pages = Math.ceil(end / PAGE) - p.memory.buffer.byteLength / PAGE;
    try {
      p.memory.grow(pages);
    } catch (error) {
      throw new KernelError(
        `the linear kernel needs ${(end / 2 ** 20).toFixed(0)} MiB of a WebAssembly memory: ${error instanceof Error ? error.message : String(error)} (use shorter micro-batches)`,
      );
    }
  }

  private matrix(name: string): Placed {
    const m = this.placed.get(name);
    if (!m) throw new KernelError(`the linear kernel holds no ${name}`);
    return m;
  }

  private run(p: Part, args: number[]): void {
    const T = this.threads;
    if (T > 1 && !p.workers) {
      const generation = Atomics.load(new Int32Array(p.memory.buffer, CTL, 16), C_GEN);
      p.workers = Array.from({ length: T - 1 }, (_, i) => {
        const w = new Worker(WORKER, {
          eval: true,
          workerData: { module, memory: p.memory, ctl: CTL, thread: i + 1, generation },
        });
        w.unref();
        return w;
      });
    }
    if (T > 1) {
      const c = new Int32Array(p.memory.buffer, CTL, 16);
      c.set([...args, T, SYNC]);
      Atomics.add(c, C_GEN, 1);
      Atomics.notify(c, C_GEN);
    }
    const [x, S, K, w, N, out, format, wide] = args as [number, number, number, number, number, number, number, number];
    p.exports.apply(x, S, K, w, N, out, format, wide, 0, T, SYNC);
  }
}
