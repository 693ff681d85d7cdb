import * as tf from '@tensorflow/tfjs';
import { readdirSync } from 'node:fs';
import { AgentR1Error } from '../../core/errors.ts';

/**
 * The WebGPU backend on Dawn (the `webgpu` npm package, whose tarball carries dawn.node) with
 * @tensorflow/tfjs-backend-webgpu. Both are optional dependencies, loaded by dynamic import.
 *
 * Dawn is asked for an adapter twice at most: its default backend at the core feature level
 * (Vulkan on Linux, Metal, D3D12), then OpenGL ES at the compatibility level (EGL; on a headless
 * Linux machine only with EGL_PLATFORM=surfaceless, which is set while the adapter is found, when
 * unset). Automatic selection
 * takes a hardware adapter only: through Mesa's software drivers the same kernels run at
 * ~1.5 GFLOP/s, far below wasm.
 */

/** What Dawn says about an adapter (GPUAdapterInfo), and which Dawn backend found it. */
export interface AdapterFacts {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallbackAdapter: boolean;
  /** The Dawn backend that found it ('default': Dawn's choice, Vulkan on Linux; 'opengles'). */
  backend: string;
}

export interface AdapterClass {
  hardware: boolean;
  /** A short name for messages: the device, with the driver description. */
  label: string;
  /** Why it counts as software (absent for hardware). */
  software?: string;
}

/**
 * Words that name a software rasterizer in an adapter's vendor, architecture, device or description:
 * Mesa's llvmpipe (OpenGL) / lavapipe (Vulkan) / softpipe / swrast, Google's SwiftShader, Microsoft's
 * WARP ("Basic Render Driver"), and Dawn's own CPU adapter type.
 */
const SOFTWARE =
  /\b(llvmpipe|lavapipe|softpipe|swrast|swiftshader|software|basic render driver|microsoft basic render|warp)\b|\bcpu\b/i;

/** Hardware or software, from what Dawn reports (pure; the probe below gathers the facts). */
export function classifyAdapter(facts: AdapterFacts): AdapterClass {
  const name = facts.device || facts.architecture || facts.vendor || 'unnamed adapter';
  const label = `${name}${facts.description ? ` (${facts.description})` : ''} via ${facts.backend}`;
  if (facts.isFallbackAdapter) return { hardware: false, label, software: 'Dawn marks it a fallback (CPU) adapter' };
  for (const field of ['vendor', 'architecture', 'device', 'description'] as const) {
    const m = SOFTWARE.exec(facts[field].replaceAll(/[-_]/g, ' '));
    if (m) return { hardware: false, label, software: `its ${field} says "${m[0]}"` };
  }
  if (!facts.device && !facts.vendor && !facts.description) {
    return { hardware: false, label, software: 'it names no device, so it cannot be told from a software one' };
  }
  return { hardware: true, label };
}

/**
 * GPU device nodes on Linux (/dev/nvidia*, /dev/dri/renderD*, WSL's /dev/dxg). A hardware adapter
 * needs one, so where there is none automatic selection does not start Dawn at all (it costs
 * ~0.2 s and prints the drivers' warnings). Null off Linux: there the adapter decides alone.
 */
export function gpuDeviceNodes(): string[] | null {
  if (process.platform !== 'linux') return null;
  const found: string[] = [];
  const list = (dir: string) => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  };
  for (const f of list('/dev')) if (/^nvidia\d+$/.test(f) || f === 'dxg') found.push(`/dev/${f}`);
  for (const f of list('/dev/dri')) if (f.startsWith('renderD')) found.push(`/dev/dri/${f}`);
  return found;
}

// ---------------------------------------------------------------------------------------------
// Dawn: probing and the tfjs backend
// ---------------------------------------------------------------------------------------------

/** The part of the WebGPU API used here (the `webgpu` package ships @webgpu/types, not a dependency here). */
interface GpuLike {
  requestAdapter(options?: { powerPreference?: string; featureLevel?: string }): Promise<AdapterLike | null>;
}
interface DeviceLike {
  addEventListener(type: 'uncapturederror', listener: (event: { error?: { message: string } }) => void): void;
  limits: { [name: string]: number };
}
interface AdapterLike {
  info: { vendor: string; architecture: string; device: string; description: string; isFallbackAdapter?: boolean };
  features: { has(name: string): boolean };
  limits: { [name: string]: number };
  requestDevice(descriptor: object): Promise<unknown>;
}

/** The GPU device reported an error (a kernel the device refused): the numbers after it are wrong. */
export class WebgpuDeviceError extends AgentR1Error {
  constructor(readonly deviceMessage: string) {
    super(`webgpu device error (results after it are invalid): ${deviceMessage.split('\n')[0]}`);
  }
}

export interface FoundAdapter {
  facts: AdapterFacts;
  kind: AdapterClass;
  /** The Dawn instance: it must stay referenced while its devices live (dropping it lets the GC tear Dawn down under them). */
  gpu: GpuLike;
  adapter: AdapterLike;
}

export interface WebgpuProbe {
  /** The first hardware adapter, else the first adapter at all, else null. */
  chosen: FoundAdapter | null;
  /** What each Dawn backend tried gave, for messages. */
  tried: string[];
}

/** The `webgpu` package, or why it does not load ('not installed' or the load error). */
async function loadDawn(): Promise<{ create(options: string[]): GpuLike; globals: Record<string, unknown> } | string> {
  try {
    return (await import(/* @vite-ignore */ 'webgpu')) as never;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException)?.code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') return 'not installed';
    return error instanceof Error ? error.message.split('\n')[0]! : String(error);
  }
}

/**
 * Asks Dawn for adapters (see the top of this file) and classifies them; stops at the first
 * hardware one. A string when the `webgpu` package does not load.
 */
export async function probeWebgpu(): Promise<WebgpuProbe | string> {
  const dawn = await loadDawn();
  if (typeof dawn === 'string') return dawn;
  const attempts: Array<{
    backend: string;
    options: string[];
    request: { powerPreference?: string; featureLevel?: string };
  }> = [
    { backend: 'default', options: [], request: { powerPreference: 'high-performance' } },
    { backend: 'opengles', options: ['backend=opengles'], request: { featureLevel: 'compatibility' } },
  ];
  const tried: string[] = [];
  let chosen: FoundAdapter | null = null;
  for (const { backend, options, request } of attempts) {
    // Mesa's EGL needs a platform; without a display only the surfaceless one initializes. It is
    // read when the adapter's EGL display opens, so it is set for that only (and not for children).
    const setPlatform = backend === 'opengles' && process.platform === 'linux' && !process.env.EGL_PLATFORM;
    if (setPlatform) process.env.EGL_PLATFORM = 'surfaceless';
    let gpu: GpuLike;
    let adapter: AdapterLike | null;
    try {
      gpu = dawn.create(options);
      adapter = await gpu.requestAdapter(request);
    } catch (error) {
      tried.push(`${backend}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
      continue;
    } finally {
      if (setPlatform) delete process.env.EGL_PLATFORM;
    }
    if (!adapter) {
      tried.push(`${backend}: no adapter`);
      continue;
    }
    const info = adapter.info;
    const facts: AdapterFacts = {
      vendor: info.vendor ?? '',
      architecture: info.architecture ?? '',
      device: info.device ?? '',
      description: info.description ?? '',
      isFallbackAdapter: info.isFallbackAdapter === true,
      backend,
    };
    const kind = classifyAdapter(facts);
    tried.push(`${backend}: ${kind.hardware ? 'hardware' : 'software'} adapter ${kind.label}`);
    if (!chosen || (kind.hardware && !chosen.kind.hardware)) chosen = { facts, kind, gpu, adapter };
    if (kind.hardware) break;
  }
  return { chosen, tried };
}

/**
 * What selection does with a probe: use its adapter, or skip webgpu and say why. Automatic
 * selection (`forced` false) uses a hardware adapter only; a forced one takes any adapter.
 */
export function webgpuVerdict(
  probe: WebgpuProbe | string,
  forced: boolean,
): { use: FoundAdapter; reason: string } | { skip: string } {
  if (typeof probe === 'string') return { skip: `webgpu: ${probe}` };
  const found = probe.chosen;
  if (!found) return { skip: `webgpu: no adapter (${probe.tried.join('; ')})` };
  if (found.kind.hardware) return { use: found, reason: `adapter ${found.kind.label}, hardware` };
  if (!forced) return { skip: `webgpu: only a software adapter, ${found.kind.label}: ${found.kind.software}` };
  return { use: found, reason: `adapter ${found.kind.label}, software (${found.kind.software})` };
}

/**
 * The WebGPU interfaces tfjs-backend-webgpu names as free identifiers while it runs (buffer and
 * texture classes for instanceof, usage and map-mode flag constants). They must be globals;
 * they are defined non-enumerable, as a browser has them, and only where absent.
 */
const RUNTIME_GLOBALS = ['GPUBuffer', 'GPUTexture', 'GPUBufferUsage', 'GPUMapMode', 'GPUTextureUsage'] as const;

/** The adapter the registered backend uses, and the Dawn instance kept alive with it. */
let live: FoundAdapter | null = null;

/**
 * Registers tfjs's `webgpu` backend on `found` (replacing any registration tfjs made itself). Our
 * own factory, not tfjs's: tfjs registers one at import only when `navigator.gpu` exists, and it
 * would then ask `navigator.gpu` for an adapter of its choosing. Node 20 has no `navigator`, and a
 * global one would leak into users' code (libraries take `navigator` to mean a browser) and keep
 * Dawn alive. So `navigator` is defined only for the one synchronous call that checks for it (the
 * WebGPUBackend constructor) and restored right after: nothing else can observe it.
 */
export async function registerWebgpu(found: FoundAdapter): Promise<void> {
  const dawn = await loadDawn();
  if (typeof dawn === 'string') throw new Error(`webgpu: ${dawn}`);
  const mod = (await import(/* @vite-ignore */ '@tensorflow/tfjs-backend-webgpu')) as {
    WebGPUBackend?: new (device: unknown, info: unknown) => tf.KernelBackend;
    default?: { WebGPUBackend: new (device: unknown, info: unknown) => tf.KernelBackend };
  };
  const WebGPUBackend = mod.WebGPUBackend ?? mod.default?.WebGPUBackend;
  if (!WebGPUBackend) throw new Error('@tensorflow/tfjs-backend-webgpu has no WebGPUBackend export');
  for (const name of RUNTIME_GLOBALS) {
    if (name in globalThis) continue;
    Object.defineProperty(globalThis, name, { value: dawn.globals[name], configurable: true, writable: true });
  }
  live = found;
  if (tf.findBackendFactory('webgpu')) tf.removeBackend('webgpu');
  tf.registerBackend('webgpu', async () => {
    const { adapter, gpu } = found;
    const l = adapter.limits;
    // tfjs-backend-webgpu's own device request: its optional features and the adapter's limits.
    const requiredFeatures = ['timestamp-query', 'bgra8unorm-storage'].filter((f) => adapter.features.has(f));
    // Plus the adapter's storage-buffer count: the default (8) is less than some kernels bind.
    const requiredLimits = Object.fromEntries(
      [
        'maxComputeWorkgroupStorageSize',
        'maxComputeWorkgroupsPerDimension',
        'maxStorageBufferBindingSize',
        'maxBufferSize',
        'maxComputeWorkgroupSizeX',
        'maxComputeInvocationsPerWorkgroup',
        'maxStorageBuffersPerShaderStage',
      ].map((k) => [k, l[k]]),
    );
    const device = (await adapter.requestDevice({ requiredFeatures, requiredLimits })) as DeviceLike;
    // A validation error leaves a kernel's output unwritten and tfjs goes on with whatever the
    // buffer held: wrong numbers, silently. Nothing computed after one can be trusted, so it ends
    // the process (thrown outside any caller's stack, like any uncaught error).
    device.addEventListener('uncapturederror', (event) => {
      const message = event.error?.message ?? String(event.error);
      process.nextTick(() => {
        throw new WebgpuDeviceError(message);
      });
    });
    const saved = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
    Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
    try {
      return new WebGPUBackend(device, adapter.info);
    } finally {
      if (saved) Object.defineProperty(globalThis, 'navigator', saved);
      else delete (globalThis as { navigator?: unknown }).navigator;
    }
  });
}

let patched = false;

/**
 * AddN for webgpu in chunks: the stock kernel binds every input as a storage buffer in one
 * program, and past the device's limit (maxStorageBuffersPerShaderStage − 1 inputs; 7 by default,
 * 15 on Mesa's GL) the program is invalid and its output is left unwritten. globalNorm adds one
 * term per weight. Concat has the same limit and chunks itself; AddN does not.
 */
export function patchWebgpuKernels(): void {
  if (patched) return;
  const original = tf.getKernel('AddN', 'webgpu');
  if (!original) return;
  patched = true;
  const kernelFunc: tf.KernelFunc = ({ inputs, backend, attrs }) => {
    const be = backend as unknown as { device: DeviceLike; disposeData(dataId: object): boolean };
    const max = Math.max(2, be.device.limits.maxStorageBuffersPerShaderStage! - 1);
    let xs = Object.values(inputs) as tf.TensorInfo[];
    const temps: tf.TensorInfo[] = [];
    while (xs.length > max) {
      const next: tf.TensorInfo[] = [];
      for (let i = 0; i < xs.length; i += max) {
        const part = xs.slice(i, i + max);
        if (part.length === 1) {
          next.push(part[0]!);
          continue;
        }
        const sum = original.kernelFunc({
          inputs: part as unknown as tf.NamedTensorInfoMap,
          backend,
          attrs,
        }) as tf.TensorInfo;
        temps.push(sum);
        next.push(sum);
      }
      xs = next;
    }
    const out = original.kernelFunc({
      inputs: xs as unknown as tf.NamedTensorInfoMap,
      backend,
      attrs,
    }) as tf.TensorInfo;
    // Freed once the queued programs that read them have run (the backend defers it).
    for (const t of temps) be.disposeData(t.dataId);
    return out;
  };
  tf.unregisterKernel('AddN', 'webgpu');
  tf.registerKernel({ kernelName: 'AddN', backendName: 'webgpu', kernelFunc, setupFunc: original.setupFunc });
}

/** The adapter the webgpu backend runs on (null before registerWebgpu). */
export function webgpuAdapter(): FoundAdapter | null {
  return live;
}
