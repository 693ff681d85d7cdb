import { Worker } from 'node:worker_threads';
import { HEAD_LOSS_WASM } from './head-loss-wasm.ts';
import { KERNEL_BASE, align16, kernelThreads } from './kernel-host.ts';

/**
 * The host of the fused head kernel (head-loss.as.ts): the log-softmax of a vocabulary head at
 * chosen tokens, forward and backward, on every core, without a [rows × vocabulary] array. Inputs
 * are copied into the kernel's shared memory per call (the head once per version of its data: the
 * backward pass of a step reuses the forward pass's copy); the per-block partial results are
 * combined here in block order. Results are the same bits for any number of threads.
 */

interface HeadExports {
  forward(...args: number[]): void;
  backward(...args: number[]): void;
  scratchBytes(): number;
}

/** Vocabulary blocks: fixed, so that who computes a block never changes how it is summed. */
const BLOCKS = 64;
const PAGE = 65536;
const MAX_PAGES = 65536;
// The control block in page 0: i32 slots 0–14 the call's arguments, then generation and stop; the barrier after it.
const CTL = KERNEL_BASE - 256;
const SYNC = CTL + 128;
const C_GEN = 20;
const C_STOP = 21;
const OP_FORWARD = 1;
const OP_BACKWARD = 2;

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, ctl, thread, generation } = workerData;
const k = new WebAssembly.Instance(module, { env: { memory } }).exports;
const c = new Int32Array(memory.buffer, ctl, 32);
const f = new Float32Array(memory.buffer, ctl, 32);
for (let seen = generation; ; ) {
  Atomics.wait(c, ${C_GEN}, seen);
  seen = Atomics.load(c, ${C_GEN});
  if (Atomics.load(c, ${C_STOP})) break;
  if (c[0] === ${OP_FORWARD}) k.forward(c[1], c[2], c[3], c[4], c[5], c[6], f[7], c[8], c[9], c[10], c[11], thread, c[13], c[14]);
  else k.backward(c[1], c[2], c[3], c[4], c[5], c[6], f[7], c[8], c[9], c[10], c[11], c[12], thread, c[13], c[14]);
}
`;

/** A forward pass's results per row: the chosen tokens' log-probs, the entropies, the normalizers. */
export interface HeadForward {
  logprobs: Float32Array;
  entropy: Float32Array;
  lse: Float32Array;
}

export class HeadKernel {
  readonly threads: number;
  private readonly memory: WebAssembly.Memory;
  private readonly exports: HeadExports;
  private readonly module: WebAssembly.Module;
  private started = false;
  /** The head now in memory: its data's identity, vocabulary and width. */
  private loaded: { key: object; V: number; d: number } | null = null;

  constructor(options: { threads?: number } = {}) {
    this.threads = options.threads ?? kernelThreads();
    this.memory = new WebAssembly.Memory({ initial: 2, maximum: MAX_PAGES, shared: true });
    this.module = new WebAssembly.Module(Uint8Array.from(Buffer.from(HEAD_LOSS_WASM, 'base64')));
    this.exports = new WebAssembly.Instance(this.module, { env: { memory: this.memory } })
      .exports as unknown as HeadExports;
  }

  private static readonly instances = new Map<number, HeadKernel>();

  /** The process's kernel on `threads` threads (one shared memory and one set of workers for every head). */
  static shared(threads: number = kernelThreads()): HeadKernel {
    let k = HeadKernel.instances.get(threads);
    if (!k) HeadKernel.instances.set(threads, (k = new HeadKernel({ threads })));
    return k;
  }

  /** Workers start on the first call and park between calls; a call made before one parks still reaches it. */
  private startWorkers(): void {
    if (this.started || this.threads === 1) return;
    this.started = true;
    const generation = Atomics.load(new Int32Array(this.memory.buffer, CTL, 32), C_GEN);
    for (let i = 1; i < this.threads; i++) {
      const worker = new Worker(WORKER, {
        eval: true,
        workerData: { module: this.module, memory: this.memory, ctl: CTL, thread: i, generation },
      });
      worker.unref();
    }
  }

  /** Addresses of a call's arrays (16-byte aligned, from KERNEL_BASE), the memory grown to hold them. */
  private layout(V: number, d: number, N4: number, withDw: boolean) {
    let p = KERNEL_BASE;
    const take = (bytes: number) => {
      const at = p;
      p = align16(p + bytes);
      return at;
    };
    const l = {
      w: take(V * d * 4),
      h: take(N4 * d * 4),
      targets: take(N4 * 4),
      stats: take(BLOCKS * N4 * 3 * 4),
      chosen: take(N4 * 4),
      rowp: take(N4 * 4 * 4),
      dhParts: take(BLOCKS * N4 * d * 4),
      dW: withDw ? take(V * d * 4) : 0,
      scratch: take(this.threads * this.exports.scratchBytes()),
    };
    const pages = Math.ceil(p / PAGE);
    if (pages > MAX_PAGES) throw new RangeError(`the head kernel needs ${p} bytes, over WebAssembly's 4 GiB`);
    const have = this.memory.buffer.byteLength / PAGE;
    if (pages > have) this.memory.grow(pages - have);
    return l;
  }

  private put(
    key: object,
    w: () => Float32Array,
    V: number,
    d: number,
    h: Float32Array,
    N: number,
    targets: Int32Array,
  ) {
    const N4 = Math.ceil(N / 4) * 4;
    return (withDw: boolean) => {
      const l = this.layout(V, d, N4, withDw);
      const buf = this.memory.buffer;
      if (this.loaded?.key !== key || this.loaded.V !== V || this.loaded.d !== d) {
        new Float32Array(this.memory.buffer, l.w, V * d).set(w());
        this.loaded = { key, V, d };
      }
      const hv = new Float32Array(buf, l.h, N4 * d);
      hv.set(h);
      hv.fill(0, N * d);
      const tv = new Int32Array(buf, l.targets, N4);
      tv.set(targets);
      tv.fill(-1, N);
      return { l, N4 };
    };
  }

  private run(op: number, args: number[]): void {
    this.startWorkers();
    const T = this.threads;
    const buf = this.memory.buffer;
    const c = new Int32Array(buf, CTL, 32);
    c.set([op, ...args.slice(0, 15)]);
    new Float32Array(buf, CTL, 32)[7] = args[6]!;
    c[13] = T;
    c[14] = SYNC;
    if (T > 1) {
      Atomics.add(c, C_GEN, 1);
      Atomics.notify(c, C_GEN);
    }
    const fn = op === OP_FORWARD ? this.exports.forward : this.exports.backward;
    fn(...args.slice(0, 12), 0, T, SYNC);
  }

  /**
   * Rows h [N][d] against the head w [V][d] (`key`: the identity of w's data, so that an unchanged
   * head is not read and copied again), at temperature 1/invT: each row's target log-prob, entropy and lse.
   */
  forward(
    key: object,
    w: () => Float32Array,
    V: number,
    d: number,
    h: Float32Array,
    targets: Int32Array,
    invT: number,
  ): HeadForward {
    const N = targets.length;
    const { l, N4 } = this.put(key, w, V, d, h, N, targets)(false);
    this.run(OP_FORWARD, [l.w, V, d, l.h, N4, l.targets, invT, BLOCKS, l.stats, l.chosen, l.scratch]);
    const buf = this.memory.buffer;
    const stats = new Float32Array(buf, l.stats, BLOCKS * N4 * 3);
    const chosen = new Float32Array(buf, l.chosen, N4);
    const out: HeadForward = {
      logprobs: new Float32Array(N),
      entropy: new Float32Array(N),
      lse: new Float32Array(N),
    };
    for (let n = 0; n < N; n++) {
      let M = Number.NEGATIVE_INFINITY;
      for (let b = 0; b < BLOCKS; b++) M = Math.max(M, stats[(b * N4 + n) * 3]!);
      let s = 0;
      let t = 0;
      for (let b = 0; b < BLOCKS; b++) {
        const i = (b * N4 + n) * 3;
        const e = Math.exp(stats[i]! - M);
        s += stats[i + 1]! * e;
        t += stats[i + 2]! * e;
      }
      const lse = M + Math.log(s);
      out.lse[n] = lse;
      out.logprobs[n] = chosen[n]! - lse;
      out.entropy[n] = lse - t / s;
    }
    return out;
  }

  /**
   * The gradients to h [N][d] and, when `withHead`, to w [V][d], given the upstream gradients of each
   * row's log-prob (gl) and entropy (ge) and the forward pass's lse and entropy.
   */
  backward(
    key: object,
    w: () => Float32Array,
    V: number,
    d: number,
    h: Float32Array,
    targets: Int32Array,
    invT: number,
    fwd: { lse: Float32Array; entropy: Float32Array },
    gl: Float32Array,
    ge: Float32Array,
    withHead: boolean,
  ): { dh: Float32Array; dw: Float32Array | null } {
    const N = targets.length;
    const { l, N4 } = this.put(key, w, V, d, h, N, targets)(withHead);
    const rowp = new Float32Array(this.memory.buffer, l.rowp, N4 * 4);
    rowp.fill(0);
    for (let n = 0; n < N; n++) {
      rowp[4 * n] = fwd.lse[n]!;
      rowp[4 * n + 1] = gl[n]! + ge[n]! * (fwd.entropy[n]! - fwd.lse[n]!);
      rowp[4 * n + 2] = ge[n]!;
      rowp[4 * n + 3] = gl[n]!;
    }
    this.run(OP_BACKWARD, [l.w, V, d, l.h, N4, l.targets, invT, BLOCKS, l.rowp, l.dhParts, l.dW, l.scratch]);
    const buf = this.memory.buffer;
    const parts = new Float32Array(buf, l.dhParts, BLOCKS * N4 * d);
    const dh = new Float32Array(N * d);
    for (let b = 0; b < BLOCKS; b++) {
      const base = b * N4 * d;
      for (let i = 0; i < N * d; i++) dh[i]! += parts[base + i]!;
    }
    return { dh, dw: withHead ? new Float32Array(buf, l.dW, V * d).slice() : null };
  }
}
