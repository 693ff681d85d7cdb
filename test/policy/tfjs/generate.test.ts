import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../../src/architectures/gpt/model.ts';
import { GenerateError, sampleToken } from '../../../src/architectures/generation.ts';
import { generate } from '../../../src/policy/tfjs/generate.ts';
import { createRng } from '../../../src/core/rng.ts';

const config = { vocabSize: 97, dModel: 32, nLayers: 2, nHeads: 4, contextLength: 96, dMlp: 64 };
let model: GPTModel;
test.before(async () => {
  await initBackend('wasm');
  model = new GPTModel(config, 7);
  // Random init makes near-uniform logits; sharpen them so greedy and sampling are meaningful.
  tf.tidy(() => model.tokEmb.assign(model.tokEmb.mul(6)));
  // A non-zero token-shift gate, so the previous-token path across cache boundaries is exercised.
  tf.tidy(() => model.shiftGate!.assign(tf.randomNormal([config.dModel], 0, 1, 'float32', 3)));
});

const prompt = (n: number, salt: number) =>
  Array.from({ length: n }, (_, j) => (j * 31 + salt * 17 + 3) % config.vocabSize);

function maxDiff(a: Float32Array[], b: Float32Array[]): number {
  let d = 0;
  a.forEach((x, s) => x.forEach((v, k) => (d = Math.max(d, Math.abs(v - b[s]![k]!)))));
  return d;
}

for (const decoder of ['kernel', 'tensors'] as const) {
  test(`cached (${decoder}) and uncached decoding give the same logits (1e-4) and the same greedy tokens`, async (t) => {
    const rows = [5, 9, 14].map((n, i) => ({ tokens: prompt(n, i), seed: i, maxTokens: 12 }));
    const greedy = { temperature: 0 };
    const cached = await generate(model, rows, { sampling: greedy, returnLogits: true, decoder });
    const full = await generate(model, rows, { sampling: greedy, returnLogits: true, useCache: false });
    cached.forEach((r, i) => {
      t.deepEqual(r.tokens, full[i]!.tokens);
      t.is(r.tokens.length, 12);
      t.true(maxDiff(r.logits!, full[i]!.logits!) < 1e-4, `row ${i}: ${maxDiff(r.logits!, full[i]!.logits!)}`);
    });
    t.true(new Set(cached.map((r) => r.tokens.join())).size > 1, 'rows differ');
  });

  test(`a later turn prefills only the new tokens and matches a full recomputation (${decoder})`, async (t) => {
    const rows = [6, 11].map((n, i) => ({ tokens: prompt(n, i + 5), seed: 40 + i, maxTokens: 6 }));
    const first = await generate(model, rows, { keepCache: true, decoder });
    const second = rows.map((r, i) => ({
      tokens: [...r.tokens, ...first[i]!.tokens, 1, 2, 3],
      seed: 50 + i,
      maxTokens: 6,
      cache: first[i]!.cache,
    }));
    const withCache = await generate(model, second, { returnLogits: true, decoder });
    const without = await generate(
      model,
      second.map((r) => ({ ...r, cache: undefined })),
      { returnLogits: true, useCache: false },
    );
    withCache.forEach((r, i) => {
      t.is(r.prefilled, 4, 'the last action token and the 3 new tokens');
      t.deepEqual(r.tokens, without[i]!.tokens);
      t.true(maxDiff(r.logits!, without[i]!.logits!) < 1e-4);
    });
  });

  test(`a context that rewrote what follows a shared prefix reuses the prefix's keys and values, bit for bit (${decoder})`, async (t) => {
    // The step-level MDP: the next step's prompt keeps the opening (20 tokens here) and replaces the rest.
    const opening = prompt(20, 7);
    const [first] = await generate(model, [{ tokens: [...opening, 5, 6, 7], seed: 3, maxTokens: 5 }], {
      keepCache: true,
      decoder,
    });
    const next = { tokens: [...opening, 9, 8, 7, 6], seed: 4, maxTokens: 6 };
    const [reused] = await generate(model, [{ ...next, cache: first!.cache }], { returnLogits: true, decoder });
    const [fresh] = await generate(model, [next], { returnLogits: true, decoder });
    t.is(reused!.prefilled, 4, 'only what follows the shared 20 tokens');
    t.is(fresh!.prefilled, 24);
    t.deepEqual(reused!.tokens, fresh!.tokens);
    t.deepEqual(reused!.logprobs, fresh!.logprobs);
    t.is(maxDiff(reused!.logits!, fresh!.logits!), 0);
    // A short shared prefix is prefilled again.
    const [short] = await generate(
      model,
      [{ tokens: [opening[0]!, 1, 2, 3], seed: 4, maxTokens: 2, cache: first!.cache }],
      {
        decoder,
      },
    );
    t.is(short!.prefilled, 4);
  });

  for (const sampling of [{ temperature: 1 }, { temperature: 0.7 }, { temperature: 1, topK: 20 }]) {
    test(`a sequence's sampled tokens are identical alone and in a batch of 16 (${decoder}, ${JSON.stringify(sampling)})`, async (t) => {
      const target = { tokens: prompt(10, 99), seed: 123, maxTokens: 20 };
      const alone = (await generate(model, [target], { sampling, decoder }))[0]!;
      const neighbours = Array.from({ length: 15 }, (_, i) => ({
        tokens: prompt(3 + ((i * 7) % 30), i),
        seed: 1000 + i,
        maxTokens: 4 + (i % 20),
      }));
      const batch = [...neighbours.slice(0, 7), target, ...neighbours.slice(7)];
      const together = (await generate(model, batch, { sampling, decoder }))[7]!;
      t.deepEqual(together.tokens, alone.tokens);
      t.deepEqual(together.logprobs, alone.logprobs);
      const reseeded = (await generate(model, [{ ...target, seed: 124 }], { sampling, decoder }))[0]!;
      t.notDeepEqual(reseeded.tokens, alone.tokens);
    });
  }
}

test('the two decoders sample the same tokens, their log-probs within 1e-5', async (t) => {
  const rows = [4, 17, 30].map((n, i) => ({ tokens: prompt(n, i + 20), seed: 70 + i, maxTokens: 16 }));
  for (const sampling of [{ temperature: 1 }, { temperature: 0.5 }, { temperature: 0 }, { topP: 0.9 }]) {
    const kernel = await generate(model, rows, { sampling, decoder: 'kernel' });
    const tensors = await generate(model, rows, { sampling, decoder: 'tensors' });
    kernel.forEach((r, i) => {
      t.deepEqual(r.tokens, tensors[i]!.tokens, JSON.stringify(sampling));
      r.logprobs.forEach((x, j) => t.true(Math.abs(x - tensors[i]!.logprobs[j]!) <= 1e-5));
    });
  }
});

test.serial('stop tokens end a row (included); the context bounds generation; no tensors leak', async (t) => {
  const run = () =>
    generate(
      model,
      [
        { tokens: prompt(8, 1), seed: 5, maxTokens: 30 },
        { tokens: prompt(94, 2), seed: 1, maxTokens: 10 },
      ],
      {},
    );
  await run(); // warms the model's causal-mask cache
  const before = tf.memory().numTensors;
  await run();
  const [free] = await generate(model, [{ tokens: prompt(8, 1), seed: 5, maxTokens: 30 }], {
    sampling: { temperature: 0 },
  });
  const stopAt = free.tokens[3]!;
  const first = free.tokens.indexOf(stopAt);
  const [stopped] = await generate(model, [{ tokens: prompt(8, 1), seed: 5, maxTokens: 30 }], {
    sampling: { temperature: 0 },
    stopTokens: new Set([stopAt]),
  });
  t.is(stopped.stop, 'stop');
  t.deepEqual(stopped.tokens, free.tokens.slice(0, first + 1));
  const [nearEnd] = await generate(model, [{ tokens: prompt(94, 2), seed: 1, maxTokens: 10 }], {});
  t.is(nearEnd.tokens.length, 3);
  t.is(nearEnd.stop, 'context');
  t.is(tf.memory().numTensors, before);
});

test('sampling: greedy, top-k 1, and log-probs of the untempered distribution', (t) => {
  const logits = Float32Array.from([0, 2, 1, -1]);
  const z = Math.log(1 + Math.exp(2) + Math.exp(1) + Math.exp(-1));
  t.deepEqual(sampleToken(logits, createRng(1), { temperature: 0 }).token, 1);
  const k1 = sampleToken(logits, createRng(2), { topK: 1, temperature: 5 });
  t.is(k1.token, 1);
  t.true(Math.abs(k1.logprob - (2 - z)) < 1e-6);
  const counts = [0, 0, 0, 0];
  const rng = createRng(3);
  for (let i = 0; i < 2000; i++) counts[sampleToken(logits, rng, { topP: 0.7 }).token]!++;
  t.is(counts[0]! + counts[3]!, 0, 'nucleus keeps only the top two');
});

test('bad rows get clear errors', async (t) => {
  await t.throwsAsync(generate(model, [{ tokens: [], seed: 1, maxTokens: 3 }]), {
    instanceOf: GenerateError,
    message: /no tokens/,
  });
  await t.throwsAsync(generate(model, [{ tokens: [1], seed: 1, maxTokens: -1 }]), {
    instanceOf: GenerateError,
    message: /maxTokens/,
  });
});
