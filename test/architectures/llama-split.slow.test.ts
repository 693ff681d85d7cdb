import test from 'ava';
import { generateOnKernel } from '../../src/architectures/generation.ts';
import type { KVCache } from '../../src/architectures/kv-cache.ts';
import { LlamaDecoder } from '../../src/architectures/llama/decoder.ts';
import { LLAMA_LORA_TARGETS } from '../../src/architectures/llama/config.ts';
import { initLora } from '../../src/architectures/lora.ts';
import { loraWeights } from '../../src/hf/peft.ts';
import { kernelLogits, ROWS } from '../helpers/kernel-logits.ts';
import { splitModels } from '../helpers/split-model.ts';

// (slow suite) A model split across WebAssembly memories computes what one memory does: the same
// logits, bit for bit, on 1 and 2 threads, with and without LoRA adapters; the same tokens; its
// caches go out and come back in across the parts; and it loads straight into the parts' memories.
// How parts are planned and bad layouts: llama-split.test.ts.

const models = splitModels();
test.after.always(() => models.remove());

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

for (const [dtype, tie] of [
  ['BF16', true],
  ['F32', false],
  ['F16', true],
] as const) {
  test(`${dtype}${tie ? ', tied' : ', untied'}: split into 2 and 3 memories, the logits are one memory's bit for bit, on 1 and 2 threads`, async (t) => {
    const model = await models.load({ dtype, tie });
    const one = await kernelLogits(model, 1);
    for (const parts of [TWO, THREE]) {
      for (const threads of [1, 2])
        t.deepEqual(await kernelLogits(model, threads, parts), one, `${parts.length} parts, ${threads} threads`);
    }
  });
}

test('with LoRA adapters beside a split BF16 base: the logits are those of one memory, bit for bit', async (t) => {
  const model = await models.load({ dtype: 'BF16', tie: true });
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
  const model = await models.load({ dtype: 'BF16', tie: true });
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
  const model = await models.load({ dtype: 'BF16', tie: true });
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
