import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateOnKernel } from '../../src/architectures/generation.ts';
import type { KVCache } from '../../src/architectures/kv-cache.ts';
import { LlamaDecoder, planParts } from '../../src/architectures/llama/decoder.ts';
import { LLAMA_LORA_TARGETS, llamaConfigFromHf } from '../../src/architectures/llama/config.ts';
import { initLora } from '../../src/architectures/lora.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { loraWeights } from '../../src/hf/peft.ts';
import { writeTinyFolder, type TinyFolder } from '../helpers/hf-folder.ts';
import { kernelLogits, ROWS } from '../helpers/kernel-logits.ts';

// A model past one WebAssembly memory is split by layers, each part in its own memory: the same
// logits, bit for bit, as in one memory, on 1 and 2 threads, with and without LoRA adapters; the
// caches go out and come back across the parts.

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-llama-split-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const SPEC: TinyFolder = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 32,
  layers: 5,
  heads: 4,
  kvHeads: 2,
  headDim: 8,
  intermediate: 44,
  seed: 21,
};

// Five layers in two memories, and in three (the last with only the head).
const TWO = [
  { first: 0, layers: 3 },
  { first: 3, layers: 2 },
];
const THREE = [
  { first: 0, layers: 2 },
  { first: 2, layers: 3 },
  { first: 5, layers: 0 },
];

/** Each distinct folder is written once (tests that share a spec share it), then loaded fresh. */
const folders = new Map<string, Promise<string>>();
async function tinyModel(spec: Partial<TinyFolder> = {}) {
  const key = JSON.stringify(spec);
  let dir = folders.get(key);
  if (!dir) {
    const path = join(root, `m${folders.size}`);
    folders.set(key, (dir = writeTinyFolder(path, { ...SPEC, ...spec }).then(() => path)));
  }
  return (await loadHfModel(await openHfFolder(await dir))).model;
}

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
  const model = await tinyModel();
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

for (const [dtype, tie] of [
  ['BF16', true],
  ['F32', false],
  ['F16', true],
] as const) {
  test(`${dtype}${tie ? ', tied' : ', untied'}: split into 2 and 3 memories, the logits are one memory's bit for bit, on 1 and 2 threads`, async (t) => {
    const model = await tinyModel({ dtype, tie });
    const one = await kernelLogits(model, 1);
    for (const parts of [TWO, THREE]) {
      for (const threads of [1, 2])
        t.deepEqual(await kernelLogits(model, threads, parts), one, `${parts.length} parts, ${threads} threads`);
    }
  });
}

test('with LoRA adapters beside a split BF16 base: the logits are those of one memory, bit for bit', async (t) => {
  const model = await tinyModel({ dtype: 'BF16', tie: true });
  const lora = initLora(
    { rank: 3, alpha: 6, targets: [...LLAMA_LORA_TARGETS] },
    loraWeights(model.config, LLAMA_LORA_TARGETS),
    2,
  );
  for (const pair of lora.pairs.values()) pair.B.forEach((_, i) => (pair.B[i] = Math.sin(i + 1) * 0.2));
  model.setAdapters(lora);
  model.revision++;
  const one = await kernelLogits(model, 2);
  t.deepEqual(await kernelLogits(model, 2, TWO), one);
});

test('a split model generates the same tokens, and its caches go out and back in across the parts', async (t) => {
  const model = await tinyModel({ dtype: 'BF16', tie: true });
  const split = new LlamaDecoder(model, { threads: 2, parts: THREE });
  const rows = ROWS.map((tokens, i) => ({ tokens, seed: i, maxTokens: 6 }));
  const options = { sampling: { temperature: 0.8 } };
  const want = await generateOnKernel(new LlamaDecoder(model, { threads: 1 }), rows, options);
  t.deepEqual(await generateOnKernel(split, rows, options), want);
  // A cache exported from the split kernel and fed back in continues as a prefill of the whole would.
  await split.prepare();
  const s = split.session([{ capacity: 40 }]);
  let cache: KVCache;
  try {
    s.step([{ slot: 0, tokens: ROWS[2]!.slice(0, 10) }]);
    cache = s.exportCache(0, 20);
  } finally {
    s.close();
  }
  const a = split.session([{ cache, capacity: 40 }]);
  let resumed: Float32Array;
  try {
    resumed = a.step([{ slot: 0, tokens: ROWS[2]!.slice(10) }])[0]!.slice();
  } finally {
    a.close();
  }
  const b = split.session([{ capacity: 40 }]);
  try {
    t.deepEqual(b.step([{ slot: 0, tokens: ROWS[2]! }])[0]!.slice(), resumed);
  } finally {
    b.close();
  }
});

test("a model loads straight into its decoder's memories (views, no copy); a matrix widened by training moves them out first, the logits unchanged", async (t) => {
  const model = await tinyModel({ dtype: 'BF16', tie: true });
  const name = 'model.layers.1.mlp.down_proj.weight';
  const held = model.stored(name) as { bits: Uint16Array };
  t.true(held.bits.buffer instanceof SharedArrayBuffer, 'a view of the kernel memory');
  const decoder = LlamaDecoder.for(model);
  const logits = async () => {
    await decoder.prepare();
    const s = decoder.session([{ capacity: 40 }]);
    try {
      return s.step([{ slot: 0, tokens: ROWS[2]! }])[0]!.slice();
    } finally {
      s.close();
    }
  };
  const before = await logits();
  // Training writes a matrix back in float32 (the same values here): the layout becomes float32's.
  model.setWeight(name, model.baseWeight(name));
  model.revision++;
  t.is(model.matrixFormat, null);
  const after = await logits();
  t.false(
    (model.stored('model.layers.0.self_attn.q_proj.weight') as { bits: Uint16Array }).bits.buffer instanceof
      SharedArrayBuffer,
  );
  t.deepEqual(after, before);
});
