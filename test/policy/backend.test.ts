import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend, backendInfo } from '../../src/policy/tfjs/backend.ts';
import { UnknownNameError } from '../../src/core/errors.ts';

test.serial('auto selection tries the node bindings first, says why it fell back, and lands on wasm here', async (t) => {
  const info = await initBackend();
  t.is(info.name, 'wasm');
  t.regex(info.reason, /tfjs-node-gpu: not installed/);
  t.regex(info.reason, /tfjs-node: not installed/);
  t.is(backendInfo(), info);
  t.is(tf.getBackend(), 'wasm');
});

test.serial('an unknown backend name is a clear error', async (t) => {
  await t.throwsAsync(initBackend('tpu'), { instanceOf: UnknownNameError, message: /unknown backend "tpu"; valid: tensorflow-gpu, tensorflow, wasm, cpu/ });
});

test.serial('the patched wasm BatchMatMul (explicit transposes, batched 2-D calls) matches the cpu backend', async (t) => {
  await initBackend('wasm');
  const cases: Array<[number[], number[], boolean, boolean]> = [
    [[3, 70, 40], [3, 40, 50], false, false],
    [[3, 40, 70], [3, 40, 50], true, false],
    [[2, 3, 70, 40], [2, 3, 50, 40], false, true],
    [[70, 40], [1, 40, 50], false, false],
    [[4, 1, 16], [4, 16, 30], false, false],
    [[300, 40], [20, 300], true, true],
  ];
  const inputs = cases.map(([a, b]) => [tf.randomNormal(a, 0, 1, 'float32', 1).arraySync(), tf.randomNormal(b, 0, 1, 'float32', 2).arraySync()] as const);
  const wasm = cases.map(([a, b, ta, tb], i) => tf.matMul(tf.tensor(inputs[i]![0] as number[], a), tf.tensor(inputs[i]![1] as number[], b), ta, tb).dataSync());
  await tf.setBackend('cpu');
  const cpu = cases.map(([a, b, ta, tb], i) => tf.matMul(tf.tensor(inputs[i]![0] as number[], a), tf.tensor(inputs[i]![1] as number[], b), ta, tb).dataSync());
  await tf.setBackend('wasm');
  wasm.forEach((w, i) => {
    t.is(w.length, cpu[i]!.length);
    let d = 0;
    w.forEach((x, j) => (d = Math.max(d, Math.abs(x - cpu[i]![j]!))));
    t.true(d < 1e-3, `case ${i}: max diff ${d}`);
  });
});
