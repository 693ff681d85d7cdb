// (slow suite) The Llama family's TensorFlow.js forward, what training differentiates: its gradients with
// the projections in the linear kernel (every weight or LoRA over a frozen base), checkpointed or
// not, equal tfjs's own, the same bits on 1 and 2 threads.

import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LLAMA_LORA_TARGETS } from '../../src/architectures/llama/config.ts';
import { LlamaTfjs } from '../../src/architectures/llama/tfjs-model.ts';
import { initLora } from '../../src/architectures/lora.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { loraWeights } from '../../src/hf/peft.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

let root: string;
/** Qwen2's biases and an untied head, so that every kind of parameter has a gradient. */
let qwen2: string;
test.before(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'agent-r1-llama-tfjs-'));
  qwen2 = join(root, 'qwen2');
  await writeTinyFolder(qwen2, {
    architecture: 'Qwen2ForCausalLM',
    hidden: 32,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    intermediate: 48,
    tie: false,
    seed: 9,
    embedStd: 0.3,
  });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The gradients of a log-likelihood-like loss with respect to every trainable variable, by position. */
function gradients(net: LlamaTfjs, tokens: number[][]): Float32Array[] {
  const input = tf.tensor2d(tokens, [tokens.length, tokens[0]!.length], 'int32');
  const { value, grads } = tf.variableGrads(() => {
    const hidden = net.hiddenStates(input);
    return net.logitsOf(hidden).logSoftmax().mean().neg() as tf.Scalar;
  }, net.trainableVariables);
  const out = net.trainableVariables.map((v) => grads[v.name]!.dataSync() as Float32Array);
  tf.dispose([input, value, ...Object.values(grads)]);
  return out;
}

test('a checkpointed forward (every layer, or the first ones as far as the budget needs, recomputed a sequence at a time in the backward pass) gives the plain gradients, for full fine-tuning and for LoRA', async (t) => {
  const { model } = await loadHfModel(await openHfFolder(qwen2));
  const tokens = [
    [5, 9, 200, 7, 7, 31],
    [151644, 3, 4, 5, 6, 100],
  ];
  const lora = initLora(
    { rank: 2, alpha: 4, targets: [...LLAMA_LORA_TARGETS] },
    loraWeights(model.config, LLAMA_LORA_TARGETS),
    1,
  );
  // B off zero, so that the gradients of A are not zero.
  for (const pair of lora.pairs.values()) pair.B.forEach((_, i) => (pair.B[i] = Math.sin(i) * 0.1));
  for (const [name, options] of [
    ['full fine-tuning', {}],
    ['LoRA', { lora }],
  ] as const) {
    const plain = new LlamaTfjs(model, options);
    // Every layer recomputed, one sequence at a time; and the first layer alone (the budget holds one).
    const checkpointed = new LlamaTfjs(model, { ...options, checkpoint: { above: 0, chunkBytes: 0 } });
    const oneLayer = plain.activationBytes(2, 6) / 2;
    const partly = new LlamaTfjs(model, { ...options, checkpoint: { above: oneLayer, chunkBytes: 0 } });
    t.true(plain.activationBytes(2, 6) > 0);
    const a = gradients(plain, tokens);
    t.is(a.length, plain.trainableVariables.length);
    t.true(a.length > 0);
    for (const [how, net] of [
      ['all', checkpointed],
      ['the first', partly],
    ] as const) {
      const b = gradients(net, tokens);
      a.forEach((g, i) => {
        const worst = g.reduce((m, x, j) => Math.max(m, Math.abs(x - b[i]![j]!)), 0);
        const scale = g.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        t.true(
          worst <= 1e-6 * Math.max(1, scale),
          `${name}, ${how} recomputed: ${plain.trainableVariables[i]!.name} differs by ${worst}`,
        );
      });
    }
    partly.dispose();
    // Forward alone, the two are the same function.
    const input = tf.tensor2d(tokens, [2, 6], 'int32');
    const [ha, hb] = [plain.hiddenStates(input), checkpointed.hiddenStates(input)];
    t.deepEqual(await ha.data(), await hb.data());
    tf.dispose([input, ha, hb]);
    plain.dispose();
    checkpointed.dispose();
  }
});

test('LoRA over a frozen base kept in the linear kernel (its checkpoint dtype, every core): the gradients and states of the base as tensors, checkpointed or not; the merged weights alike', async (t) => {
  for (const dtype of ['F32', 'BF16'] as const) {
    const dir = join(root, `qwen3-kernel-base-${dtype}`);
    await writeTinyFolder(dir, {
      architecture: 'Qwen3ForCausalLM',
      hidden: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      headDim: 8,
      intermediate: 40,
      tie: true,
      seed: 4,
      embedStd: 0.3,
      ...(dtype === 'BF16' ? { dtype } : {}),
    });
    const { model } = await loadHfModel(await openHfFolder(dir));
    const lora = initLora(
      { rank: 2, alpha: 4, targets: [...LLAMA_LORA_TARGETS] },
      loraWeights(model.config, LLAMA_LORA_TARGETS),
      1,
    );
    for (const pair of lora.pairs.values()) pair.B.forEach((_, i) => (pair.B[i] = Math.cos(i) * 0.1));
    const tokens = [
      [5, 9, 200, 7, 7, 31, 2],
      [151644, 3, 4, 5, 6, 100, 8],
    ];
    const tensors = new LlamaTfjs(model, { lora });
    const kernel = new LlamaTfjs(model, { lora, projectionKernel: {} });
    const recomputed = new LlamaTfjs(model, { lora, projectionKernel: {}, checkpoint: { above: 0, chunkBytes: 0 } });
    t.truthy(kernel.linear);
    t.false(kernel.variables.has('model.layers.0.self_attn.q_proj.weight'), 'the base matrix is not a tensor');
    const want = gradients(tensors, tokens);
    for (const [name, net] of [
      ['kernel', kernel],
      ['kernel, recomputed', recomputed],
    ] as const) {
      const got = gradients(net, tokens);
      t.is(got.length, want.length);
      got.forEach((g, i) => {
        const scale = want[i]!.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        const worst = g.reduce((m, x, j) => Math.max(m, Math.abs(x - want[i]![j]!)), 0);
        t.true(
          scale > 0 && worst <= 1e-4 * scale,
          `${dtype} ${name}: ${net.trainableVariables[i]!.name} differs by ${worst} (scale ${scale})`,
        );
      });
    }
    // The merged weights the sampler gets are the same either way.
    await tensors.writeBack();
    const fromTensors = model.weight('model.layers.1.mlp.down_proj.weight').slice();
    await kernel.writeBack();
    t.deepEqual(model.weight('model.layers.1.mlp.down_proj.weight'), fromTensors);
    for (const net of [tensors, kernel, recomputed]) net.dispose();
  }
});

test('full fine-tuning with the projections in the linear kernel: the gradients of tensors, checkpointed or not; the same bits on 1 and 2 threads; an updated weight is what the kernel multiplies by', async (t) => {
  const { model } = await loadHfModel(await openHfFolder(qwen2));
  const tokens = [
    [5, 9, 200, 7, 7, 31],
    [151644, 3, 4, 5, 6, 100],
  ];
  const tensors = new LlamaTfjs(model);
  const one = new LlamaTfjs(model, { projectionKernel: { threads: 1 } });
  const two = new LlamaTfjs(model, { projectionKernel: { threads: 2 } });
  const recomputed = new LlamaTfjs(model, {
    projectionKernel: { threads: 2 },
    checkpoint: { above: 0, chunkBytes: 0 },
  });
  try {
    t.true(one.variables.has('model.layers.0.self_attn.q_proj.weight'), 'a trained projection stays a tensor');
    const want = gradients(tensors, tokens);
    const got = gradients(one, tokens);
    t.is(got.length, want.length);
    const close = (a: Float32Array[], label: string) =>
      a.forEach((g, i) => {
        const scale = want[i]!.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
        const worst = g.reduce((m, x, j) => Math.max(m, Math.abs(x - want[i]![j]!)), 0);
        t.true(scale > 0 && worst <= 1e-4 * scale, `${label}: ${one.trainableVariables[i]!.name} differs by ${worst}`);
      });
    close(got, 'kernel');
    close(gradients(recomputed, tokens), 'kernel, recomputed');
    t.deepEqual(gradients(two, tokens), got, 'the same bits on 2 threads');
    // An update (a new value assigned) reaches the kernel before the next product.
    const input = tf.tensor2d(tokens, [2, 6], 'int32');
    const before = one.hiddenStates(input);
    const name = 'model.layers.1.mlp.down_proj.weight';
    for (const net of [tensors, one]) {
      const v = net.variables.get(name)!;
      tf.tidy(() => v.assign(v.mul(1.5)));
    }
    const [after, reference] = [one.hiddenStates(input), tensors.hiddenStates(input)];
    const [b, a, r] = [await before.data(), await after.data(), await reference.data()];
    t.false(
      a.every((x, i) => x === b[i]),
      'the product changed',
    );
    t.true(a.every((x, i) => Math.abs(x - r[i]!) <= 1e-4));
    tf.dispose([input, before, after, reference]);
  } finally {
    for (const net of [tensors, one, two, recomputed]) net.dispose();
  }
});
