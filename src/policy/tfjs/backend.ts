import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { AgentR1Error, UnknownNameError } from '../../core/errors.ts';
import { gpuDeviceNodes, patchWebgpuKernels, probeWebgpu, registerWebgpu, webgpuVerdict } from './webgpu.ts';

/**
 * Backend selection. Order: tfjs-node-gpu (CUDA) → tfjs-node → webgpu (Dawn) → wasm → cpu. The
 * node bindings download libtensorflow at install time and are optional, so they are tried by
 * dynamic import; so is webgpu (webgpu.ts), which is taken automatically only on a hardware
 * adapter; wasm always loads. On wasm, BatchMatMul and GatherV2 are re-registered (see
 * patchWasmKernels) because the stock ones are many times slower on the shapes a transformer uses;
 * webgpu keeps its own kernels.
 */
export const BACKEND_NAMES = ['tensorflow-gpu', 'tensorflow', 'webgpu', 'wasm', 'cpu'] as const;
export type BackendChoice = (typeof BACKEND_NAMES)[number];

export interface BackendInfo {
  /** tfjs's name of the active backend (`tensorflow`, `webgpu`, `wasm`, `cpu`). */
  name: string;
  /** Why this one: what loaded, what did not (for webgpu: the adapter and its driver). */
  reason: string;
}

/** A backend asked for by name that cannot run here; `reason` says what was tried. */
export class BackendUnavailableError extends AgentR1Error {
  constructor(
    readonly backend: string,
    readonly reason: string,
  ) {
    super(`backend ${backend} cannot run here: ${reason}`);
  }
}

let active: BackendInfo | null = null;
let pending: Promise<BackendInfo> | null = null;

async function tryImport(name: string): Promise<string | null> {
  try {
    await import(/* @vite-ignore */ name);
    return null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException)?.code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') return 'not installed';
    return error instanceof Error ? error.message.split('\n')[0]! : String(error);
  }
}

async function activate(name: string): Promise<boolean> {
  if (!tf.findBackendFactory(name) && !tf.findBackend(name)) return false;
  const ok = await tf.setBackend(name);
  if (!ok) return false;
  await tf.ready();
  if (name === 'wasm') patchWasmKernels();
  if (name === 'webgpu') patchWebgpuKernels();
  return true;
}

/**
 * Selects and initializes the backend once per process. `preferred` forces one (an error if it
 * cannot load). Environment variable AGENT_R1_BACKEND does the same for tests and benches.
 */
export function initBackend(preferred?: string): Promise<BackendInfo> {
  const want = preferred ?? process.env.AGENT_R1_BACKEND;
  if (active && (!want || want === active.name || (want === 'tensorflow-gpu' && active.name === 'tensorflow'))) {
    return Promise.resolve(active);
  }
  // A second call while the first selects waits for it (two selections at once fail each other).
  if (pending && (!want || want === pendingWant)) return pending;
  pendingWant = want;
  pending = select(want).then((info) => {
    active = info;
    return info;
  });
  return pending;
}

let pendingWant: string | undefined;

/**
 * webgpu's turn: null with the reason when it is not used. Automatic selection needs a GPU device
 * node (Linux) and then a hardware adapter; `forced` takes any adapter Dawn offers.
 */
let webgpuReason: string | null = null;

async function tryWebgpu(forced: boolean): Promise<{ reason: string } | { skip: string }> {
  // Back to webgpu after another backend: the same device (its tensors live there), not a new one.
  if (webgpuReason && tf.findBackend('webgpu') && (await activate('webgpu'))) return { reason: webgpuReason };
  if (!forced) {
    const nodes = gpuDeviceNodes();
    if (nodes?.length === 0) return { skip: 'webgpu: no GPU device (/dev/nvidia*, /dev/dri/renderD*, /dev/dxg)' };
  }
  const verdict = webgpuVerdict(await probeWebgpu(), forced);
  if ('skip' in verdict) return verdict;
  await registerWebgpu(verdict.use);
  if (!(await activate('webgpu')))
    return { skip: `webgpu: the backend on ${verdict.use.kind.label} did not initialize` };
  webgpuReason = verdict.reason;
  return { reason: verdict.reason };
}

async function select(want: string | undefined): Promise<BackendInfo> {
  if (want !== undefined && !(BACKEND_NAMES as readonly string[]).includes(want)) {
    throw new UnknownNameError('backend', want, BACKEND_NAMES);
  }
  const skipped: string[] = [];
  const candidates: BackendChoice[] = want ? [want as BackendChoice] : [...BACKEND_NAMES];
  for (const candidate of candidates) {
    if (candidate === 'tensorflow-gpu' || candidate === 'tensorflow') {
      const pkg = candidate === 'tensorflow-gpu' ? '@tensorflow/tfjs-node-gpu' : '@tensorflow/tfjs-node';
      const failure = await tryImport(pkg);
      if (failure !== null) {
        skipped.push(`${pkg}: ${failure}`);
        continue;
      }
      if (await activate('tensorflow')) {
        return { name: 'tensorflow', reason: `${pkg} loaded` + (skipped.length ? `; ${skipped.join('; ')}` : '') };
      }
      skipped.push(`${pkg} loaded but its backend did not initialize`);
      continue;
    }
    if (candidate === 'webgpu') {
      const r = await tryWebgpu(want === 'webgpu');
      if ('reason' in r) return { name: 'webgpu', reason: want ? `requested; ${r.reason}` : r.reason };
      skipped.push(r.skip);
      continue;
    }
    if (await activate(candidate)) {
      const why = want ? 'requested' : skipped.length ? skipped.join('; ') : 'first available';
      return { name: candidate, reason: why };
    }
    skipped.push(`${candidate} did not initialize`);
  }
  if (want) throw new BackendUnavailableError(want, skipped.join('; '));
  throw new UnknownNameError('backend (none could load)', 'auto', BACKEND_NAMES);
}

export function backendInfo(): BackendInfo | null {
  return active;
}

// ---------------------------------------------------------------------------------------------
// wasm kernel fixes
// ---------------------------------------------------------------------------------------------

interface WasmTensorData {
  id: number;
  memoryOffset: number;
  shape: number[];
  dtype: string;
}

interface WasmBackendLike {
  wasm: {
    cwrap(name: string, ret: null, args: string[]): (...args: unknown[]) => void;
    tfjs: { registerTensor(id: number, size: number, offset: number): void; disposeData(id: number): void };
  };
  dataIdMap: { get(dataId: object): WasmTensorData };
  dataIdNextNumber: number;
  makeOutput(shape: number[], dtype: string): tf.TensorInfo;
  disposeData(dataId: object): boolean;
}

let patched = false;
const LOOP_MIN_WORK = 32_768;

/**
 * Replaces wasm's BatchMatMul: (1) a transposed operand is transposed explicitly first (the
 * kernel's own transpose flags take a path 10-30× slower); (2) a batch of matmuls runs as one
 * 2-D call per batch entry on views into the operands' memory, because the stock batched path is
 * a naive loop (~1 GFLOP/s) while the 2-D path uses XNNPACK. Both are exact (same arithmetic per
 * output element). Also registers UnsortedSegmentSum (gather's gradient), which wasm lacks.
 */
function patchWasmKernels(): void {
  if (patched) return;
  const original = tf.getKernel('BatchMatMul', 'wasm');
  const transpose = tf.getKernel('Transpose', 'wasm');
  if (!original || !transpose) return;
  patched = true;
  let raw: ((...args: unknown[]) => void) | null = null;
  const kernelFunc: tf.KernelFunc = ({ inputs, backend, attrs }) => {
    const be = backend as unknown as WasmBackendLike;
    let a = inputs.a as tf.TensorInfo;
    let b = inputs.b as tf.TensorInfo;
    const { transposeA, transposeB } = attrs as { transposeA: boolean; transposeB: boolean };
    const temps: tf.TensorInfo[] = [];
    const flip = (x: tf.TensorInfo): tf.TensorInfo => {
      const r = x.shape.length;
      const perm = [...Array(r).keys()];
      [perm[r - 2], perm[r - 1]] = [perm[r - 1]!, perm[r - 2]!];
      const out = transpose.kernelFunc({ inputs: { x }, backend, attrs: { perm } }) as tf.TensorInfo;
      temps.push(out);
      return out;
    };
    if (transposeA) a = flip(a);
    if (transposeB) b = flip(b);
    const ra = a.shape.length;
    const rb = b.shape.length;
    const [m, k] = [a.shape[ra - 2]!, a.shape[ra - 1]!];
    const n = b.shape[rb - 1]!;
    const batchA = a.shape.slice(0, -2).reduce((x, y) => x * y, 1);
    const batchB = b.shape.slice(0, -2).reduce((x, y) => x * y, 1);
    const sameOuter = a.shape.length === b.shape.length && a.shape.slice(0, -2).every((d, i) => d === b.shape[i]);
    let out: tf.TensorInfo;
    // Small products (decoding: one query row) are faster in the stock kernel: a 2-D call costs ~30 µs.
    const small = m * k * n < LOOP_MIN_WORK;
    if (
      small ||
      (batchA === 1 && batchB === 1) ||
      !(sameOuter || batchA === 1 || batchB === 1) ||
      a.dtype !== 'float32'
    ) {
      out = original.kernelFunc({
        inputs: { a, b },
        backend,
        attrs: { ...attrs, transposeA: false, transposeB: false },
      }) as tf.TensorInfo;
    } else {
      raw ??= be.wasm.cwrap('BatchMatMul', null, [
        'number',
        'array',
        'number',
        'number',
        'array',
        'number',
        'number',
        'number',
        'number',
      ]);
      const batch = Math.max(batchA, batchB);
      const outerShape = batchA >= batchB ? a.shape.slice(0, -2) : b.shape.slice(0, -2);
      out = be.makeOutput([...outerShape, m, n], 'float32');
      const ad = be.dataIdMap.get(a.dataId);
      const bd = be.dataIdMap.get(b.dataId);
      const od = be.dataIdMap.get(out.dataId);
      const aShape = new Uint8Array(new Int32Array([1, m, k]).buffer);
      const bShape = new Uint8Array(new Int32Array([1, k, n]).buffer);
      const view = (offset: number, size: number): number => {
        const id = be.dataIdNextNumber++;
        be.wasm.tfjs.registerTensor(id, size, offset);
        return id;
      };
      for (let i = 0; i < batch; i++) {
        const ai = view(ad.memoryOffset + (batchA === 1 ? 0 : i * m * k * 4), m * k);
        const bi = view(bd.memoryOffset + (batchB === 1 ? 0 : i * k * n * 4), k * n);
        const oi = view(od.memoryOffset + i * m * n * 4, m * n);
        raw(ai, aShape, 3, bi, bShape, 3, 0, 0, oi);
        // Only the C++ registration (and any operator cached for it) goes; the memory is the parent's.
        be.wasm.tfjs.disposeData(ai);
        be.wasm.tfjs.disposeData(bi);
        be.wasm.tfjs.disposeData(oi);
      }
    }
    for (const t of temps) be.disposeData(t.dataId);
    return out;
  };
  tf.unregisterKernel('BatchMatMul', 'wasm');
  tf.registerKernel({ kernelName: 'BatchMatMul', backendName: 'wasm', kernelFunc, setupFunc: original.setupFunc });
  registerSegmentSum();
  registerGather();
}

/**
 * GatherV2 for wasm as row copies (TypedArray.set on views of the heap): the stock kernel computes
 * every element's index separately and took ~15 ms to look up 4,800 embedding rows of 64, 13% of an
 * SFT step. A copy, so the results are the same bits. Batched gathers and other dtypes keep the
 * stock kernel.
 */
function registerGather(): void {
  const original = tf.getKernel('GatherV2', 'wasm');
  if (!original) return;
  const kernelFunc: tf.KernelFunc = ({ inputs, backend, attrs }) => {
    const be = backend as unknown as WasmBackendLike & {
      typedArrayFromHeap(t: tf.TensorInfo): Float32Array | Int32Array;
    };
    const x = inputs.x as tf.TensorInfo;
    const indices = inputs.indices as tf.TensorInfo;
    const { axis, batchDims } = attrs as { axis: number; batchDims: number };
    if (batchDims !== 0 || !(x.dtype === 'float32' || x.dtype === 'int32') || indices.dtype !== 'int32') {
      return original.kernelFunc({ inputs, backend, attrs });
    }
    const ax = axis < 0 ? axis + x.shape.length : axis;
    const outer = x.shape.slice(0, ax).reduce((p, q) => p * q, 1);
    const n = x.shape[ax]!;
    const inner = x.shape.slice(ax + 1).reduce((p, q) => p * q, 1);
    for (const i of be.typedArrayFromHeap(indices)) {
      if (i < 0 || i >= n) throw new RangeError(`GatherV2: the index value ${i} is not in [0, ${n - 1}]`);
    }
    const out = be.makeOutput([...x.shape.slice(0, ax), ...indices.shape, ...x.shape.slice(ax + 1)], x.dtype);
    // Views only after the allocation: growing the wasm heap detaches every earlier view.
    const idx = be.typedArrayFromHeap(indices);
    const src = be.typedArrayFromHeap(x);
    const dst = be.typedArrayFromHeap(out);
    const m = idx.length;
    for (let o = 0; o < outer; o++) {
      if (inner === 1) {
        for (let j = 0; j < m; j++) dst[o * m + j] = src[o * n + idx[j]!]!;
        continue;
      }
      for (let j = 0; j < m; j++) {
        const from = (o * n + idx[j]!) * inner;
        dst.set(src.subarray(from, from + inner), (o * m + j) * inner);
      }
    }
    return out;
  };
  tf.unregisterKernel('GatherV2', 'wasm');
  tf.registerKernel({ kernelName: 'GatherV2', backendName: 'wasm', kernelFunc, setupFunc: original.setupFunc });
}

/** UnsortedSegmentSum for wasm, in JS: gather's gradient (only needed if a model uses tf.gather under grads). */
function registerSegmentSum(): void {
  if (tf.getKernel('UnsortedSegmentSum', 'wasm')) return;
  tf.registerKernel({
    kernelName: 'UnsortedSegmentSum',
    backendName: 'wasm',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const be = backend as unknown as WasmBackendLike & { readSync(id: object): Float32Array | Int32Array };
      const x = inputs.x as tf.TensorInfo;
      const ids = inputs.segmentIds as tf.TensorInfo;
      const numSegments = (attrs as { numSegments: number }).numSegments;
      const xv = be.readSync(x.dataId);
      const iv = be.readSync(ids.dataId);
      const inner = x.shape.slice(ids.shape.length).reduce((p, q) => p * q, 1);
      const out = new Float32Array(numSegments * inner);
      for (let i = 0; i < iv.length; i++) {
        const s = iv[i]!;
        if (s < 0 || s >= numSegments) continue;
        for (let j = 0; j < inner; j++) out[s * inner + j]! += xv[i * inner + j]!;
      }
      const info = be.makeOutput([numSegments, ...x.shape.slice(ids.shape.length)], x.dtype);
      (be as unknown as { typedArrayFromHeap(t: tf.TensorInfo): Float32Array }).typedArrayFromHeap(info).set(out);
      return info;
    },
  });
}
