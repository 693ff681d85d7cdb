import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend, backendInfo } from '../../../src/policy/tfjs/backend.ts';
import { classifyAdapter, gpuDeviceNodes, type AdapterFacts } from '../../../src/policy/tfjs/webgpu.ts';
import { UnknownNameError } from '../../../src/core/errors.ts';

test.serial(
  'auto selection tries the node bindings first, says why it fell back, and lands on wasm here',
  async (t) => {
    const info = await initBackend();
    t.is(info.name, 'wasm');
    t.regex(info.reason, /tfjs-node-gpu: not installed/);
    t.regex(info.reason, /tfjs-node: not installed/);
    // This machine has no GPU: webgpu is passed over (not installed, no GPU device, or a software adapter).
    t.regex(info.reason, /webgpu: (not installed|no GPU device|only a software adapter|no adapter)/);
    if (gpuDeviceNodes()?.length === 0) t.regex(info.reason, /webgpu: (not installed|no GPU device)/);
    t.is(backendInfo(), info);
    t.is(tf.getBackend(), 'wasm');
  },
);

test.serial('an unknown backend name is a clear error', async (t) => {
  await t.throwsAsync(initBackend('tpu'), {
    instanceOf: UnknownNameError,
    message: /unknown backend "tpu"; valid: tensorflow-gpu, tensorflow, webgpu, wasm, cpu/,
  });
});

test.serial(
  'the patched wasm BatchMatMul (explicit transposes, batched 2-D calls) matches the cpu backend',
  async (t) => {
    await initBackend('wasm');
    const cases: Array<[number[], number[], boolean, boolean]> = [
      [[3, 70, 40], [3, 40, 50], false, false],
      [[3, 40, 70], [3, 40, 50], true, false],
      [[2, 3, 70, 40], [2, 3, 50, 40], false, true],
      [[70, 40], [1, 40, 50], false, false],
      [[4, 1, 16], [4, 16, 30], false, false],
      [[300, 40], [20, 300], true, true],
    ];
    const inputs = cases.map(
      ([a, b]) =>
        [
          tf.randomNormal(a, 0, 1, 'float32', 1).arraySync(),
          tf.randomNormal(b, 0, 1, 'float32', 2).arraySync(),
        ] as const,
    );
    const wasm = cases.map(([a, b, ta, tb], i) =>
      tf.matMul(tf.tensor(inputs[i]![0] as number[], a), tf.tensor(inputs[i]![1] as number[], b), ta, tb).dataSync(),
    );
    await tf.setBackend('cpu');
    const cpu = cases.map(([a, b, ta, tb], i) =>
      tf.matMul(tf.tensor(inputs[i]![0] as number[], a), tf.tensor(inputs[i]![1] as number[], b), ta, tb).dataSync(),
    );
    await tf.setBackend('wasm');
    wasm.forEach((w, i) => {
      t.is(w.length, cpu[i]!.length);
      let d = 0;
      w.forEach((x, j) => (d = Math.max(d, Math.abs(x - cpu[i]![j]!))));
      t.true(d < 1e-3, `case ${i}: max diff ${d}`);
    });
  },
);

test.serial(
  'the patched wasm GatherV2 (row copies) gives the cpu backend’s bits, also when its output grows the wasm heap',
  async (t) => {
    await initBackend('wasm');
    const cases: Array<[number[], number[], number, 'float32' | 'int32']> = [
      [[768, 64], [4800], 0, 'float32'],
      [[5000], [3, 700], 0, 'float32'],
      [[8, 60, 16], [2, 5], 1, 'float32'],
      [[4, 5, 6], [7], 2, 'int32'],
      [[4, 5, 6], [3], -1, 'float32'],
      // ~96 MB out: the allocation grows the heap, which detaches views taken before it.
      [[1000, 64], [375_000], 0, 'float32'],
    ];
    const heap = () => (tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.buffer.byteLength;
    const run = (grew?: boolean[]) =>
      cases.map(([shape, ishape, axis, dtype]) => {
        const size = shape.reduce((a, b) => a * b, 1);
        const x = tf.tensor(
          Array.from({ length: size }, (_, i) => (dtype === 'int32' ? i : Math.sin(i) * 100)),
          shape,
          dtype,
        );
        const n = shape.at(axis)!;
        const indices = tf.tensor(
          Array.from({ length: ishape.reduce((a, b) => a * b, 1) }, (_, i) => (i * 7919) % n),
          ishape,
          'int32',
        );
        const before = grew ? heap() : 0;
        const y = tf.gather(x, indices, axis);
        grew?.push(heap() > before);
        const out = { shape: y.shape, data: y.dataSync().slice() };
        tf.dispose([x, indices, y]);
        return out;
      });
    const grew: boolean[] = [];
    const wasm = run(grew);
    t.true(grew.at(-1), 'the last case should grow the heap');
    await tf.setBackend('cpu');
    const cpu = run();
    await tf.setBackend('wasm');
    wasm.forEach((w, i) => {
      t.deepEqual(w.shape, cpu[i]!.shape);
      t.true(
        w.data.every((v, j) => Object.is(v, cpu[i]!.data[j])),
        `case ${i} differs`,
      );
    });
    t.throws(() => tf.gather(tf.ones([3, 2]), tf.tensor1d([0, 3], 'int32')), {
      message: /index value 3 is not in \[0, 2\]/,
    });
  },
);

const adapter = (over: Partial<AdapterFacts>): AdapterFacts => ({
  vendor: '',
  architecture: '',
  device: '',
  description: '',
  isFallbackAdapter: false,
  backend: 'default',
  ...over,
});

test('adapter classification: software rasterizers are refused by name, GPUs are taken', (t) => {
  const software: Array<[Partial<AdapterFacts>, RegExp]> = [
    // What Dawn reports for Mesa's llvmpipe behind OpenGL ES on this machine.
    [
      {
        device: 'llvmpipe-llvm-15-0-6-256-bits-',
        description: 'OpenGL version OpenGL ES 3.2 Mesa 22.3.6',
        backend: 'opengles',
      },
      /llvmpipe/,
    ],
    // lavapipe (Mesa's Vulkan on the CPU) names its device llvmpipe too.
    [{ vendor: 'mesa', device: 'llvmpipe (LLVM 15.0.6, 256 bits)', description: 'Mesa 23.3.6' }, /llvmpipe/],
    [{ vendor: 'mesa', device: 'lavapipe', description: 'Mesa' }, /lavapipe/],
    [{ vendor: 'google', architecture: 'swiftshader', device: 'SwiftShader Device (Subzero)' }, /swiftshader/i],
    [{ vendor: 'microsoft', device: 'Microsoft Basic Render Driver' }, /basic render/i],
    [{ device: 'softpipe', description: 'Mesa softpipe' }, /softpipe/],
    [{ device: 'Some Device', description: 'a software renderer' }, /software/],
    [{ vendor: 'x', device: 'CPU adapter' }, /cpu/i],
    [{ vendor: 'nvidia', device: 'NVIDIA H200', isFallbackAdapter: true }, /fallback/],
    [{}, /names no device/],
  ];
  for (const [facts, why] of software) {
    const c = classifyAdapter(adapter(facts));
    t.false(c.hardware, JSON.stringify(facts));
    t.regex(c.software!, why);
  }
  const hardware: Partial<AdapterFacts>[] = [
    { vendor: 'nvidia', architecture: 'hopper', device: 'NVIDIA H200', description: 'NVIDIA: 550.54.15 550.54.15.0' },
    { vendor: 'nvidia', architecture: 'ampere', device: 'NVIDIA A100-SXM4-80GB', description: 'NVIDIA: 535.104.05' },
    {
      vendor: 'amd',
      architecture: 'rdna-3',
      device: 'AMD Radeon RX 7900 XTX (RADV NAVI31)',
      description: 'radv Mesa 24.0.5',
    },
    {
      vendor: 'intel',
      architecture: 'xe-2lpg',
      device: 'Intel(R) Arc(tm) Graphics (MTL)',
      description: 'Intel open-source Mesa driver',
    },
    { vendor: 'apple', architecture: 'metal-3', device: 'Apple M2 Max', backend: 'default' },
    { device: 'Mali-G78', description: 'OpenGL ES 3.2 v1.r40p0', backend: 'opengles' },
  ];
  for (const facts of hardware) {
    const c = classifyAdapter(adapter(facts));
    t.true(c.hardware, JSON.stringify(facts));
    t.regex(c.label, new RegExp(facts.device!.replace(/[()]/g, '.')));
  }
});
