import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRng } from '../../../src/core/rng.ts';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { loadCheckpoint, saveCheckpoint } from '../../../src/policy/tfjs/checkpoint.ts';
import { forwardRows, newCache } from '../../../src/architectures/gpt/decode.ts';
import { generate } from '../../../src/policy/tfjs/generate.ts';
import { GPTModel } from '../../../src/architectures/gpt/model.ts';
import { padBatch, scoreSequences, scoreTokens } from '../../../src/policy/tfjs/score.ts';
import { AdamW } from '../../../src/policy/tfjs/adamw.ts';
import { SFT_ADAMW } from '../../../src/policy/tfjs/sft.ts';
import { trainTokenizer } from '../../../src/policy/tfjs/tokenizer.ts';

const config = { vocabSize: 50, dModel: 32, nLayers: 2, nHeads: 4, contextLength: 64, dMlp: 64, copyHead: true };
let model: GPTModel;
test.before(async () => {
  await initBackend('wasm');
  model = new GPTModel(config, 3);
  // A gate away from ½ and sharper copy attention, so both parts of the mixture matter.
  tf.tidy(() => {
    model.copy!.gateB.assign(tf.tensor1d([0.4]));
    model.copy!.wq.assign(model.copy!.wq.mul(20));
  });
});

const seq = [1, 5, 7, 9, 5, 7, 2, 3, 5, 8, 11, 12, 7, 7, 30];

test('the copy head mixes two distributions: every row of the output is a distribution', (t) => {
  const { logits } = model.forward(tf.tensor2d([seq], [1, seq.length], 'int32'));
  for (const row of logits.arraySync()[0]!) t.true(Math.abs(row.reduce((a, x) => a + Math.exp(x), 0) - 1) < 1e-4);
  logits.dispose();
});

test('incremental rows (the KV cache carries copy keys and token ids) equal the full forward pass', async (t) => {
  const full = model.forward(tf.tensor2d([seq], [1, seq.length], 'int32')).logits.arraySync()[0]!;
  const cache = newCache(model, 2);
  const other = newCache(model);
  let d = 0;
  const cmp = (got: number[], at: number) => got.forEach((x, v) => (d = Math.max(d, Math.abs(x - full[at]![v]!))));
  cmp((await forwardRows(model, [{ tokens: seq.slice(0, 6), cache }])).arraySync()[0]!, 5);
  // In a batch with another row, and over a cache that had to grow.
  const two = await forwardRows(model, [
    { tokens: seq.slice(6, 11), cache, prevToken: seq[5] },
    { tokens: [4, 4, 4], cache: other },
  ]);
  cmp(two.arraySync()[0]!, 10);
  cmp(
    (await forwardRows(model, [{ tokens: seq.slice(11), cache, prevToken: seq[10] }])).arraySync()[0]!,
    seq.length - 1,
  );
  t.true(d < 1e-5, `max diff ${d}`);
  t.deepEqual([...cache.ids.subarray(0, cache.length)], seq);
  // A cache for a model without a copy head does not fit.
  await t.throwsAsync(
    forwardRows(model, [{ tokens: [1], cache: newCache(new GPTModel({ ...config, copyHead: false }, 1)) }]),
    { message: /another model shape/ },
  );
});

test('scoreTokens equals scoreSequences at the selected positions, and gradients reach the copy weights', (t) => {
  const tokens = tf.tensor2d([seq, seq.slice().reverse()], [2, seq.length], 'int32');
  const select = [3, 4, 7, seq.length + 2, seq.length + 9, seq.length + 10];
  const some = scoreTokens(model, tokens, select).logprobs.arraySync();
  const all = scoreSequences(model, { tokens }).logprobs.arraySync().flat();
  some.forEach((x, j) => t.true(Math.abs(x - all[select[j]!]!) < 1e-5));
  const { grads } = tf.variableGrads(() => scoreTokens(model, tokens, select).logprobs.sum() as tf.Scalar);
  for (const name of ['copy.wq', 'copy.wk', 'copy.gate.w', 'copy.gate.b']) {
    const g = Object.entries(grads).find(([k]) => k.endsWith(name))![1];
    t.true(g.abs().sum().dataSync()[0]! > 0, name);
  }
  tf.dispose([tokens, ...Object.values(grads)]);
});

test('a row generates the same tokens alone or batched, greedy and sampled', async (t) => {
  const rows = [seq.slice(0, 9), seq.slice(3), [2, 2, 9]].map((tokens, i) => ({ tokens, seed: 10 + i, maxTokens: 8 }));
  for (const sampling of [{ temperature: 0 }, { temperature: 1 }]) {
    const batched = await generate(model, rows, { sampling });
    for (const [i, row] of rows.entries()) {
      t.deepEqual((await generate(model, [row], { sampling }))[0]!.tokens, batched[i]!.tokens);
    }
    const uncached = await generate(model, rows, { sampling: { temperature: 0 }, useCache: false });
    if (sampling.temperature === 0) uncached.forEach((r, i) => t.deepEqual(r.tokens, batched[i]!.tokens));
  }
});

test('checkpoints keep the copy head', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'copy-head-'));
  try {
    const tokenizer = trainTokenizer(['a b c'], { vocabSize: 271 + 10 });
    const m = new GPTModel({ ...config, vocabSize: tokenizer.vocabSize }, 4);
    await saveCheckpoint(dir, m, tokenizer);
    const back = await loadCheckpoint(dir);
    t.true(back.model.config.copyHead);
    const x = tf.tensor2d([[1, 2, 3, 1, 2]], [1, 5], 'int32');
    t.deepEqual(back.model.forward(x).logits.arraySync(), m.forward(x).logits.arraySync());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('with a copy head a small model learns to copy unseen tokens where the same model without it does not yet', async (t) => {
  // Sequences "x1 … x6 SEP x1 … x6" of random tokens; the loss is on the copy. Same data, init seed, steps.
  const V = 48;
  const SEP = 1;
  const rng = createRng(9);
  const make = () => {
    const xs = Array.from({ length: 6 }, () => 2 + Math.floor(rng.next() * (V - 2)));
    return [...xs, SEP, ...xs];
  };
  const train = Array.from({ length: 40 }, () => Array.from({ length: 8 }, make));
  const held = Array.from({ length: 16 }, make);
  const accuracy = (m: GPTModel) => {
    const { tokens } = padBatch(held, 0);
    const lp = m.forward(tokens).logits.argMax(-1).arraySync() as number[][];
    tokens.dispose();
    let right = 0;
    held.forEach((s, b) => s.slice(7).forEach((x, j) => (right += lp[b]![6 + j] === x ? 1 : 0)));
    return right / (held.length * 6);
  };
  const fitCopies = async (copyHead: boolean) => {
    const m = new GPTModel(
      { vocabSize: V, dModel: 32, nLayers: 1, nHeads: 2, contextLength: 16, dMlp: 64, copyHead },
      1,
    );
    const schedule = { warmupSteps: 4, totalSteps: train.length };
    const opt = new AdamW(m.trainableVariables, { ...SFT_ADAMW, lr: 1e-2, schedule, weightDecay: 0.01, clipNorm: 1 });
    const select = (B: number) =>
      Array.from({ length: B }, (_, b) => [7, 8, 9, 10, 11, 12].map((t0) => b * 13 + t0)).flat();
    for (const batch of train) {
      const { tokens } = padBatch(batch, 0);
      await opt.minimize(() => scoreTokens(m, tokens, select(batch.length)).logprobs.mean().neg() as tf.Scalar);
      tokens.dispose();
    }
    opt.dispose();
    const acc = accuracy(m);
    m.dispose();
    return acc;
  };
  const withCopy = await fitCopies(true);
  const without = await fitCopies(false);
  t.true(withCopy > 0.9, `copy head: ${withCopy}`);
  t.true(without < withCopy - 0.3, `without: ${without}, with: ${withCopy}`);
});
