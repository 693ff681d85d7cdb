import test from 'ava';
import { execFileSync } from 'node:child_process';
import { LLAMA_KERNEL_WASM } from '../../src/architectures/llama/kernel/llama-kernel-wasm.ts';
import { DECODE_KERNEL_WASM } from '../../src/architectures/gpt/kernel/decode-kernel-wasm.ts';

test('the committed decode kernels are what their sources compile to (npm run build:kernel after editing one)', (t) => {
  // A plain node child: the compiler (binaryen) loads several times slower under the test's tsx hooks.
  t.notThrows(() => execFileSync(process.execPath, ['bin/build-kernel.js', '--check'], { stdio: 'pipe' }));
  // Each exports what the kernel host (kernel-host.ts) calls; the Llama kernel takes the shared
  // memory its threads run on from its host, the other needs nothing.
  for (const [wasm, imports] of [
    [DECODE_KERNEL_WASM, []],
    [LLAMA_KERNEL_WASM, [{ module: 'env', name: 'memory', kind: 'memory' }]],
  ] as const) {
    const module = new WebAssembly.Module(Uint8Array.from(Buffer.from(wasm, 'base64')));
    t.deepEqual(WebAssembly.Module.imports(module), imports);
    t.deepEqual(
      WebAssembly.Module.exports(module)
        .map((e) => e.name)
        .sort(),
      ['memory', 'scratchBytes', 'step', 'weigh'],
    );
  }
});
