import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { ModelError, parameterShapes, parseModelConfig } from '../../../src/architectures/gpt/model-config.ts';
import { GPTModel, WASM_ATTENTION_LIMIT_BYTES } from '../../../src/architectures/gpt/model.ts';
import { AdamW } from '../../../src/policy/tfjs/adamw.ts';
import { maskedIndices, maskedNll, padBatch, scoreSequences, scoreTokens } from '../../../src/policy/tfjs/score.ts';
import { SFT_ADAMW } from '../../../src/policy/tfjs/sft.ts';

test.before(async () => {
  await initBackend('wasm');
});

test.serial(
  'a full training step runs on wasm (gather gradient registered, patched matmul) and lowers the loss',
  async (t) => {
    t.is(tf.getBackend(), 'wasm');
    const model = new GPTModel({ vocabSize: 64, dModel: 32, nLayers: 2, nHeads: 4, contextLength: 32, dMlp: 64 }, 5);
    const seqs = [
      [1, 2, 3, 4, 5, 6, 7, 8],
      [9, 8, 7, 6, 5],
      [3, 3, 3, 3, 3, 3],
    ];
    const masks = seqs.map((s) => s.map((_, i) => (i >= 2 ? 1 : 0)));
    const { tokens, mask } = padBatch(seqs, 0, masks);
    const schedule = { warmupSteps: 2, totalSteps: 30 };
    const opt = new AdamW(model.trainableVariables, {
      ...SFT_ADAMW,
      lr: 1e-2,
      schedule,
      weightDecay: 0.01,
      clipNorm: 1,
    });
    const first = await opt.minimize(() => maskedNll(scoreSequences(model, { tokens }).logprobs, mask!));
    const before = tf.memory().numTensors;
    let last = first;
    for (let i = 0; i < 25; i++)
      last = await opt.minimize(() => maskedNll(scoreSequences(model, { tokens }).logprobs, mask!));
    t.is(tf.memory().numTensors, before, 'no tensors leak per step');
    t.true(first.gradNorm > 0);
    t.true(last.loss < first.loss * 0.5, `${first.loss} → ${last.loss}`);
    t.is(last.step, 26);
    tf.dispose([tokens, mask!]);
    opt.dispose();
    model.dispose();
  },
);

test('a batch whose attention would overrun the wasm heap is refused by name, before any work', (t) => {
  const model = new GPTModel({ vocabSize: 16, dModel: 16, nLayers: 1, nHeads: 4, contextLength: 1024, dMlp: 32 }, 1);
  // rows × heads × T² × 4 bytes: 64 × 4 × 1024² × 4 = 1 GiB per attention tensor
  const big = tf.zeros([64, 1024], 'int32') as tf.Tensor2D;
  const before = tf.memory().numTensors;
  t.true(64 * 4 * 1024 * 1024 * 4 > WASM_ATTENTION_LIMIT_BYTES);
  t.throws(() => model.forward(big), {
    instanceOf: ModelError,
    message: /1024 MiB per attention tensor.*smaller microbatch/,
  });
  t.is(tf.memory().numTensors, before);
  // the same tokens in batches of 8 are fine
  const small = big.slice([0, 0], [8, 1024]) as tf.Tensor2D;
  const { logits, values } = model.forward(small);
  t.deepEqual(logits.shape, [8, 1024, 16]);
  tf.dispose([big, small, logits, values]);
  model.dispose();
});

test('scoreSequences: aligned per token, log-probs ≤ 0, entropy ≤ log V, gradients reach every weight', (t) => {
  const model = new GPTModel({ vocabSize: 32, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 16, dMlp: 32 }, 2);
  const tokens = tf.tensor2d(
    [
      [1, 2, 3, 4],
      [5, 6, 0, 0],
    ],
    [2, 4],
    'int32',
  );
  const s = scoreSequences(model, { tokens });
  const lp = s.logprobs.arraySync();
  const ent = s.entropy.arraySync();
  t.deepEqual([lp[0]![0], lp[1]![0]], [0, 0]);
  t.true(lp.flat().every((x) => x <= 0));
  t.true(ent.flat().every((x) => x >= 0 && x <= Math.log(32) + 1e-5));
  // Row 0's scores do not depend on what row 1 holds (right padding only affects later positions).
  const alone = scoreSequences(model, {
    tokens: tf.tensor2d([[1, 2, 3, 4]], [1, 4], 'int32'),
  }).logprobs.arraySync()[0]!;
  alone.forEach((x, i) => t.true(Math.abs(x - lp[0]![i]!) < 1e-5));
  const { grads } = tf.variableGrads(
    () =>
      scoreSequences(model, { tokens }).logprobs.sum().add(scoreSequences(model, { tokens }).values.sum()) as tf.Scalar,
  );
  t.is(Object.keys(grads).length, model.trainableVariables.length);
  model.dispose();
});

test('bad configs and inputs are clear errors', (t) => {
  t.throws(() => new GPTModel({ vocabSize: 10 } as never), { instanceOf: ModelError, message: /bad model config/ });
  const m = new GPTModel({ vocabSize: 10, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 4, dMlp: 8 });
  t.throws(() => m.forward(tf.zeros([1, 5], 'int32') as tf.Tensor2D), {
    instanceOf: ModelError,
    message: /longer than the context/,
  });
  t.throws(() => padBatch([[1, 2, 3]], 0, [[1]]), { instanceOf: RangeError });
  m.dispose();
});

test('scoreTokens equals scoreSequences at the selected positions, and its gather gradient works on wasm', (t) => {
  const model = new GPTModel({ vocabSize: 40, dModel: 16, nLayers: 2, nHeads: 2, contextLength: 16, dMlp: 32 }, 9);
  const seqs = [
    [1, 2, 3, 4, 5],
    [6, 7, 8],
  ];
  const masks = [
    [0, 0, 1, 1, 1],
    [0, 1, 1],
  ];
  const { tokens, length } = padBatch(seqs, 0);
  const select = maskedIndices(masks, length);
  t.deepEqual(select, [2, 3, 4, 6, 7]);
  const full = scoreSequences(model, { tokens }).logprobs.arraySync().flat();
  const some = scoreTokens(model, tokens, select).logprobs.arraySync();
  select.forEach((i, j) => t.true(Math.abs(full[i]! - some[j]!) < 1e-5));
  const { grads } = tf.variableGrads(() => scoreTokens(model, tokens, select).logprobs.sum() as tf.Scalar);
  const emb = grads[model.tokEmb.name]!.arraySync() as number[][];
  t.true(
    emb[3]!.some((x) => x !== 0),
    'a used token gets a gradient',
  );
  t.throws(() => scoreTokens(model, tokens, [5]), { instanceOf: RangeError, message: /not a token index/ });
  model.dispose();
});

test('the wasm UnsortedSegmentSum kernel matches the cpu backend', async (t) => {
  const x = [
    [1, 2],
    [3, 4],
    [5, 6],
    [7, 8],
  ];
  const ids = [2, 0, 2, -1];
  const wasm = tf.unsortedSegmentSum(tf.tensor2d(x), tf.tensor1d(ids, 'int32'), 3).arraySync();
  await tf.setBackend('cpu');
  const cpu = tf.unsortedSegmentSum(tf.tensor2d(x), tf.tensor1d(ids, 'int32'), 3).arraySync();
  await tf.setBackend('wasm');
  t.deepEqual(wasm, cpu);
  t.deepEqual(wasm, [
    [3, 4],
    [0, 0],
    [6, 8],
  ]);
});

// A checkpoint's weight specs are checked against parameterShapes before the model is built: it must
// be exactly what the constructor makes, in its order, for every kind of model.
test('parameterShapes lists the weights the model builds, in order', (t) => {
  const base = { vocabSize: 40, dModel: 8, nLayers: 2, nHeads: 2, contextLength: 8, dMlp: 16 };
  for (const extra of [
    {},
    { positions: 'learned' as const },
    { tokenShift: false },
    { copyHead: true },
    { positions: 'learned' as const, tokenShift: false, copyHead: true },
  ]) {
    const model = new GPTModel({ ...base, ...extra }, 1);
    t.deepEqual(
      model.namedWeights().map(([name, v]) => [name, v.shape]),
      parameterShapes(parseModelConfig({ ...base, ...extra })),
      JSON.stringify(extra),
    );
    model.dispose();
  }
});
