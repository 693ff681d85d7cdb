import test from 'ava';
import { execFileSync } from 'node:child_process';
import { DECODE_KERNEL_WASM } from '../../../src/policy/tfjs/kernel/decode-kernel-wasm.ts';

test('the committed decode kernel is what its source compiles to (npm run build:kernel after editing it)', (t) => {
  // A plain node child: the compiler (binaryen) loads several times slower under the test's tsx hooks.
  t.notThrows(() => execFileSync(process.execPath, ['bin/build-kernel.js', '--check'], { stdio: 'pipe' }));
  // It needs nothing from its host and exports what kernel-decoder.ts calls.
  const module = new WebAssembly.Module(Uint8Array.from(Buffer.from(DECODE_KERNEL_WASM, 'base64')));
  t.deepEqual(WebAssembly.Module.imports(module), []);
  t.deepEqual(
    WebAssembly.Module.exports(module)
      .map((e) => e.name)
      .sort(),
    ['memory', 'scratchBytes', 'step', 'weigh'],
  );
});
