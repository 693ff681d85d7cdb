import test from 'ava';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateOnKernel } from '../../src/architectures/generation.ts';
import { LlamaDecoder } from '../../src/architectures/llama/decoder.ts';
import type { FloatDtype } from '../../src/formats/dtype.ts';
import { exportGguf, exportHf } from '../../src/hf/export.ts';
import { loadHfModel, openHfFolder, type HfFolder } from '../../src/hf/folder.ts';
import { installLlamaCpp, llamaCpp as llamaCppIn } from '../helpers/llama-cpp.ts';
import { referenceGenerate, writeTinyFolder, type TinyFolder } from '../helpers/hf-folder.ts';

// Parity with llama.cpp (node-llama-cpp 3.21.1's CPU build, installed on first use by
// test/oracles/llama-cpp.mjs) and with the reference written from Transformers' equations
// (test/oracles/hf_reference.py), on random folders at real shapes with the real Qwen3 and Llama 3
// tokenizers: what the model commands promise a user who exports to GGUF.

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-llama-cpp-'));
  installLlamaCpp();
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const llamaCpp = (request: object) => llamaCppIn(root, request);

const CHAT = [
  { role: 'system', content: 'You are a precise assistant. Antworte kurz.' },
  { role: 'user', content: 'Compute 12 × 7, then tell me in 日本語 😀 — and print `x => x ** 2`.' },
];

// Shapes the fast tests do not use, each architecture with what sets it apart, in each dtype.
const CASES: Array<[string, TinyFolder, FloatDtype]> = [
  [
    'Qwen3, F32, head_dim 48 ≠ hidden/heads, tied, 3 layers',
    {
      architecture: 'Qwen3ForCausalLM',
      hidden: 96,
      layers: 3,
      heads: 4,
      kvHeads: 2,
      headDim: 48,
      intermediate: 160,
      seed: 31,
    },
    'F32',
  ],
  [
    'Qwen3, BF16 in two shards',
    {
      architecture: 'Qwen3ForCausalLM',
      hidden: 64,
      layers: 2,
      heads: 2,
      kvHeads: 1,
      headDim: 64,
      intermediate: 128,
      dtype: 'BF16',
      shards: 2,
      seed: 32,
    },
    'F32',
  ],
  [
    'Qwen2, F32, untied, q/k/v biases, one kv head',
    {
      architecture: 'Qwen2ForCausalLM',
      hidden: 80,
      layers: 2,
      heads: 5,
      kvHeads: 1,
      intermediate: 144,
      tie: false,
      seed: 33,
    },
    'F32',
  ],
  [
    'Llama 3, BF16, Llama 3 tokenizer and rope scaling, untied, attention and MLP biases',
    {
      architecture: 'LlamaForCausalLM',
      hidden: 128,
      layers: 2,
      heads: 8,
      kvHeads: 2,
      intermediate: 200,
      tie: false,
      dtype: 'BF16',
      tokenizer: 'llama3',
      ropeTheta: 500000,
      ropeScaling: {
        rope_type: 'llama3',
        factor: 32,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 256,
      },
      attentionBias: true,
      mlpBias: true,
      seed: 34,
    },
    'F32',
  ],
  [
    'Llama (SmolLM2-like), F16, tied, θ 10000',
    {
      architecture: 'LlamaForCausalLM',
      hidden: 64,
      layers: 3,
      heads: 4,
      kvHeads: 4,
      intermediate: 112,
      dtype: 'F16',
      ropeTheta: 10000,
      seed: 35,
    },
    'F32',
  ],
];

async function ours(folder: HfFolder, prompt: number[], n: number) {
  const { model } = await loadHfModel(folder);
  const [res] = await generateOnKernel(LlamaDecoder.for(model), [{ tokens: prompt, seed: 0, maxTokens: n }], {
    sampling: { temperature: 0 },
    eosTokens: new Set(folder.eosTokenIds),
  });
  return { ids: res!.tokens, logprobs: res!.logprobs, model };
}

for (const [name, spec, ggufDtype] of CASES) {
  test(`greedy ids equal and logprobs within 1e-3 of the reference and of llama.cpp on the GGUF export: ${name}`, async (t) => {
    t.timeout(300_000);
    const dir = join(root, `case-${spec.seed}`);
    await writeTinyFolder(dir, spec);
    const folder = await openHfFolder(dir);
    const prompt = folder.tokenizer.encode(folder.template!.render({ messages: CHAT, addGenerationPrompt: true }));
    t.true(prompt.length > 40);
    const { ids, logprobs, model } = await ours(folder, prompt, 16);
    const reference = referenceGenerate(dir, prompt, 16);
    t.deepEqual(ids, reference.ids, 'the reference');
    logprobs.forEach((lp, i) => t.true(Math.abs(lp - reference.logprobs[i]!) < 1e-3, `reference, token ${i}`));
    const gguf = join(root, `case-${spec.seed}.gguf`);
    await exportGguf(folder, model, gguf, ggufDtype);
    const cpp = await llamaCpp({ model: gguf, generate: { prompt, maxTokens: 16, eos: folder.eosTokenIds } });
    t.deepEqual(ids, cpp.generated!.ids, 'llama.cpp');
    logprobs.forEach((lp, i) =>
      t.true(
        Math.abs(lp - cpp.generated!.logprobs[i]!) < 1e-3,
        `llama.cpp, token ${i}: ${lp} vs ${cpp.generated!.logprobs[i]}`,
      ),
    );
  });
}

test('a BF16 folder exported as a BF16 GGUF (the default: the source dtype) continues with the same greedy ids in llama.cpp', async (t) => {
  t.timeout(300_000);
  const dir = join(root, 'bf16-gguf');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    intermediate: 128,
    dtype: 'BF16',
    seed: 36,
  });
  const folder = await openHfFolder(dir);
  t.is(folder.dtype, 'BF16');
  const prompt = folder.tokenizer.encode(folder.template!.render({ messages: CHAT, addGenerationPrompt: true }));
  const { ids, logprobs, model } = await ours(folder, prompt, 12);
  const gguf = join(root, 'bf16.gguf');
  await exportGguf(folder, model, gguf, folder.dtype);
  const cpp = await llamaCpp({ model: gguf, generate: { prompt, maxTokens: 12, eos: folder.eosTokenIds } });
  t.deepEqual(cpp.generated!.ids, ids);
  // llama.cpp multiplies BF16 weights by activations rounded to BF16: its logprobs are a little off.
  logprobs.forEach((lp, i) => t.true(Math.abs(lp - cpp.generated!.logprobs[i]!) < 0.1, `token ${i}`));
});

const TEXTS = [
  'Hello, world! How are you doing today?',
  "It's a test — don't worry: we'll see. They're here; I'd say you've won.",
  'Unicode: naïve café, Ελληνικά, русский, 日本語のテキスト, 한국어, עברית, العربية.',
  'Emoji: 😀🎉👩‍👩‍👧‍👦🏳️‍🌈 and flags 🇩🇪🇯🇵, skin tones 👍🏽.',
  'function add(a, b) {\n\treturn a + b; // sum\n}\n\nconst xs = [1, 2, 3].map((x) => x ** 2);',
  'Whitespace runs:    four spaces,\t\ttwo tabs,\n\n\nthree newlines,   \n  trailing   ',
  'Numbers 1234567890 and 3.14159, 1e-7, -42, 2024-07-26, 0x1F.',
  '<|im_start|>user\nspecials <tool_call>{"name": "f"}</tool_call> inside text<|im_end|>',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>',
  '   leading spaces and a very long wooooooooooooooooooooooooooooord',
];

for (const tokenizer of ['qwen3', 'llama3'] as const) {
  test(`model tokenize equals llama.cpp's tokenizer on unicode, emoji, code, whitespace runs and specials: ${tokenizer}`, async (t) => {
    t.timeout(120_000);
    const dir = join(root, `tokenizer-${tokenizer}`);
    await writeTinyFolder(dir, {
      architecture: 'LlamaForCausalLM',
      hidden: 16,
      layers: 1,
      heads: 2,
      kvHeads: 1,
      intermediate: 16,
      tokenizer,
      seed: 38,
    });
    const folder = await openHfFolder(dir);
    const gguf = join(root, `tokenizer-${tokenizer}.gguf`);
    await exportGguf(folder, (await loadHfModel(folder)).model, gguf, 'F32');
    const cpp = await llamaCpp({ model: gguf, tokenize: TEXTS });
    TEXTS.forEach((text, i) => t.deepEqual(folder.tokenizer.encode(text), cpp.tokens![i], JSON.stringify(text)));
  });
}

test('an hf export round-trips exactly: in the source dtype the same weights file, in F32 the values widened exactly', async (t) => {
  const dir = join(root, 'roundtrip');
  await writeTinyFolder(dir, {
    architecture: 'Qwen2ForCausalLM',
    hidden: 48,
    layers: 1,
    heads: 3,
    kvHeads: 1,
    intermediate: 64,
    dtype: 'BF16',
    tie: false,
    seed: 37,
  });
  const folder = await openHfFolder(dir);
  const { model, hash } = await loadHfModel(folder);
  const same = join(root, 'roundtrip-bf16');
  await exportHf(folder, model, same, folder.dtype);
  t.true((await readFile(join(same, 'model.safetensors'))).equals(await readFile(join(dir, 'model.safetensors'))));
  t.is((await loadHfModel(await openHfFolder(same))).hash, hash);
  const wide = join(root, 'roundtrip-f32');
  await exportHf(folder, model, wide, 'F32');
  const widened = (await loadHfModel(await openHfFolder(wide))).model;
  // The bytes of each array (a loaded matrix is a view of the decode kernel's memory).
  const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  for (const name of model.weights.keys()) t.true(bytes(widened.weight(name)).equals(bytes(model.weight(name))), name);
});
