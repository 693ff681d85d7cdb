import test from 'ava';
import { LlamaDecoder, planParts } from '../../src/architectures/llama/decoder.ts';
import { llamaConfigFromHf } from '../../src/architectures/llama/config.ts';
import { splitModels } from '../helpers/split-model.ts';

// A model past one WebAssembly memory is split by layers, each part in its own memory: how the parts
// are planned, and layouts that are refused. That a split model's logits are one memory's, bit for
// bit, on 1 and 2 threads, with and without LoRA, and its caches cross the parts:
// llama-split.slow.test.ts.

const models = splitModels();
test.after.always(() => models.remove());

const config = (json: object) =>
  llamaConfigFromHf(
    { architectures: ['Qwen2ForCausalLM'], vocab_size: 151936, tie_word_embeddings: true, ...json },
    'config.json',
  );
// Qwen2.5-3B's and Qwen3-4B's shapes (config.json as published, the keys that size the weights).
const QWEN2_5_3B = config({
  hidden_size: 2048,
  intermediate_size: 11008,
  num_hidden_layers: 36,
  num_attention_heads: 16,
  num_key_value_heads: 2,
});
const QWEN3_4B = config({
  architectures: ['Qwen3ForCausalLM'],
  hidden_size: 2560,
  intermediate_size: 9728,
  num_hidden_layers: 36,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  head_dim: 128,
});

test('planParts: one memory when the weights fit; past that, balanced parts within the budget, every layer once, in order', (t) => {
  const qwen3_1_7b = config({
    architectures: ['Qwen3ForCausalLM'],
    hidden_size: 2048,
    intermediate_size: 6144,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
  });
  t.deepEqual(planParts(qwen3_1_7b, true), [{ first: 0, layers: 28 }], 'Qwen3-1.7B in BF16 (3.4 GB): one memory');
  for (const [name, c, half, n] of [
    ['Qwen2.5-3B BF16', QWEN2_5_3B, true, 3],
    ['Qwen3-4B BF16', QWEN3_4B, true, 3],
    ['Qwen3-1.7B F32', qwen3_1_7b, false, 3],
    ['Qwen2.5-3B F32', QWEN2_5_3B, false, 5],
  ] as const) {
    const parts = planParts(c, half);
    t.is(parts.length, n, name);
    let next = 0;
    for (const p of parts) {
      t.is(p.first, next, `${name}: in order`);
      next += p.layers;
    }
    t.is(next, c.numLayers, `${name}: every layer`);
    t.true(
      parts.every((p) => p.layers > 0),
      `${name}: no empty part`,
    );
  }
});

test('a layout that does not cover the layers once each, in order, is refused', async (t) => {
  const model = await models.load();
  for (const parts of [
    [],
    [{ first: 0, layers: 4 }],
    [
      { first: 0, layers: 3 },
      { first: 2, layers: 3 },
    ],
    [{ first: 1, layers: 5 }],
  ])
    t.throws(() => new LlamaDecoder(model, { parts }), { message: /do not cover layers 0 to 4/ });
});
