import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import {
  copyFile,
  link,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  truncate,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelConfigError } from '../../src/architectures/errors.ts';
import {
  LLAMA_LIMITS,
  maxWeightBytes,
  llamaConfigFromHf,
  llamaWeights,
  parameterCount,
} from '../../src/architectures/llama/config.ts';
import { fromFloat32, toFloat32, type FloatDtype } from '../../src/formats/dtype.ts';
import { ModelFileError } from '../../src/formats/errors.ts';
import {
  readSafetensorsHeader,
  readTensor,
  writeSafetensors,
  type TensorToWrite,
} from '../../src/formats/safetensors.ts';
import { readHfCheckpoint } from '../../src/hf/checkpoint.ts';
import { ChatTemplateError, HfFolderError, TokenizerSizeError } from '../../src/hf/errors.ts';
import { checkTokenizerCounts, MAX_TOKENIZER_ENTRIES } from '../../src/hf/tokenizer.ts';
import { loadHfModel, openHfChat, openHfFolder } from '../../src/hf/folder.ts';
import { QWEN3_TOKENIZER_DIR, QWEN3_VOCAB, writeTinyFolder, type TinyFolder } from '../helpers/hf-folder.ts';

/** Small shapes at Qwen3's real vocabulary (its tokenizer has 151,669 tokens). */
const SHAPE: Omit<TinyFolder, 'seed'> = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 32,
  layers: 1,
  heads: 2,
  kvHeads: 1,
  headDim: 16,
  intermediate: 48,
};

let root: string;
/** writeTinyFolder(SHAPE, seed 1): F32, tied, one safetensors file, Qwen3's tokenizer and chat template. */
let base: string;
/** The same model split over 3 shards with an index. */
let sharded: string;
/** The base folder's weights, as written. */
let baseTensors: TensorToWrite[];
/**
 * A tokenizer.json of Qwen3's format, normalizer, pre-tokenizer, decoder and added tokens (so also 151,669
 * tokens), with only the 256 first vocabulary entries and no merges: it builds in milliseconds where the
 * real one takes half a second, for the tests about weights, where the tokenizer is not what is checked.
 */
let smallTokenizer: string;

test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-folder-'));
  base = join(root, 'base');
  sharded = join(root, 'sharded');
  await writeTinyFolder(base, { ...SHAPE, seed: 1 });
  await writeTinyFolder(sharded, { ...SHAPE, seed: 1, shards: 3 });
  const header = await readSafetensorsHeader(join(base, 'model.safetensors'));
  baseTensors = [];
  for (const e of header.tensors) {
    const values = await readTensor(e);
    baseTensors.push({ name: e.name, dtype: 'F32', shape: e.shape, values: () => values });
  }
  const real = JSON.parse(await readFile(join(QWEN3_TOKENIZER_DIR, 'tokenizer.json'), 'utf8'));
  const vocab = Object.fromEntries(Object.entries(real.model.vocab).filter(([, id]) => (id as number) < 256));
  smallTokenizer = JSON.stringify({ ...real, model: { ...real.model, vocab, merges: [] } });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The base folder (with the small tokenizer) loaded, once, for the tests that compare with it. */
let baseLoaded: ReturnType<typeof loadHfModel> | undefined;
const loadBase = () =>
  (baseLoaded ??= copyOf()
    .then(openHfFolder)
    .then((f) => loadHfModel(f)));

let copies = 0;
/**
 * A copy of `from` (the base folder unless told) to break one way; with the small tokenizer unless
 * `realTokenizer`. The safetensors files are hard links to the original's (tens of copies of 20 MB
 * would be most of the run time): a test replaces one (writeSafetensors renames a new file into
 * place; `replaceFile`), never writes into it.
 */
async function copyOf(options: { from?: string; realTokenizer?: boolean } = {}): Promise<string> {
  const from = options.from ?? base;
  const dir = join(root, `case-${copies++}`);
  await mkdir(dir);
  for (const name of await readdir(from)) {
    if (name === 'tokenizer.json' && !options.realTokenizer) await writeFile(join(dir, name), smallTokenizer);
    else if (name.endsWith('.safetensors')) await link(join(from, name), join(dir, name));
    else await copyFile(join(from, name), join(dir, name));
  }
  return dir;
}

/** Writes `file` as a new file (not into the one a hard link shares). */
async function replaceFile(file: string, data: string | Uint8Array): Promise<void> {
  await rm(file, { force: true });
  await writeFile(file, data);
}

/** Rewrites a JSON file of a folder. */
async function editJson(file: string, edit: (json: any) => void): Promise<void> {
  const json = JSON.parse(await readFile(file, 'utf8'));
  edit(json);
  await writeFile(file, JSON.stringify(json, null, 2));
}

/** A config.json edit on a copy of the base folder. */
async function withConfig(edit: (config: any) => void, options: { realTokenizer?: boolean } = {}): Promise<string> {
  const dir = await copyOf(options);
  await editJson(join(dir, 'config.json'), edit);
  return dir;
}

/** A safetensors file of raw bytes per tensor (for dtypes writeSafetensors does not write). */
async function writeRawSafetensors(
  file: string,
  tensors: ReadonlyArray<{ name: string; dtype: string; shape: readonly number[]; bytes: Uint8Array }>,
): Promise<void> {
  const header: { [key: string]: unknown } = { __metadata__: { format: 'pt' } };
  let at = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + t.bytes.length] };
    at += t.bytes.length;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  await replaceFile(file, Buffer.concat([length, Buffer.from(json), ...tensors.map((t) => t.bytes)]));
}

type FileErrorClass = new (...args: any[]) => Error & { file: string; field: string | null; problem: string };

/** Asserts a refusal of `cls` that names `file` and `field` (in its properties and its message). */
async function refused(
  t: ExecutionContext,
  promise: Promise<unknown>,
  cls: FileErrorClass,
  file: string,
  field: string | null,
  problem: RegExp,
): Promise<void> {
  const error = await t.throwsAsync(promise, { instanceOf: cls });
  if (!error) return;
  t.is(error.file, file);
  t.is(error.field, field);
  t.true(error.message.startsWith(file), `the message names the file: ${error.message}`);
  if (field !== null) t.true(error.message.includes(`(${field})`), `the message names ${field}: ${error.message}`);
  t.regex(error.problem, problem);
}

const weightNames = (folderTensors: readonly { name: string }[]) => folderTensors.map((x) => x.name).sort();

/**
 * Asserts two float32 arrays hold the same bits (ava's deepEqual takes seconds on an embedding of
 * 151,936 × 32 values); on a difference, says where.
 */
function sameValues(t: ExecutionContext, actual: Float32Array, expected: Float32Array, what: string): void {
  const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  if (actual.length === expected.length && bytes(actual).equals(bytes(expected))) {
    t.pass();
    return;
  }
  const i = actual.findIndex((v, k) => !Object.is(v, expected[k]));
  t.fail(
    `${what}: ${actual.length} values, ${expected.length} expected; first difference at ${i}: ${actual[i]} ≠ ${expected[i]}`,
  );
}

// ─── The happy paths ─────────────────────────────────────────────────────────────────────────

test('a folder opens: config, Qwen3 tokenizer and chat template, eos ids, every weight indexed; loading gives the file values and a content hash', async (t) => {
  const folder = await openHfFolder(base);
  t.is(folder.dir, base);
  t.like(folder.config, {
    architecture: 'Qwen3ForCausalLM',
    vocabSize: QWEN3_VOCAB,
    hiddenSize: 32,
    intermediateSize: 48,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 16,
    tieEmbeddings: true,
    qkNorm: true,
    bosTokenId: 151643,
    dtype: 'float32',
  });
  t.is(folder.tokenizer.vocabSize, 151_669);
  t.deepEqual(folder.eosTokenIds, [151645, 151643]);
  t.is(folder.dtype, 'F32');
  t.deepEqual([...folder.weights.keys()].sort(), weightNames(llamaWeights(folder.config)));
  const prompt = folder.template!.render({ messages: [{ role: 'user', content: 'hi' }], addGenerationPrompt: true });
  t.is(prompt, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
  t.deepEqual(folder.tokenizer.encode('<|im_start|>'), [151644]);
  const { model, hash } = await loadHfModel(folder, { contextLength: 64 });
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.is(model.contextLength, 64);
  for (const w of baseTensors) sameValues(t, model.weight(w.name), (await w.values()) as Float32Array, w.name);
  t.is(model.head, model.weight('model.embed_tokens.weight'), 'tied: the head is the embedding');
});

test('a sharded folder (index + 3 files) loads the same weights, and the same content hash, as the unsharded folder of the same seed', async (t) => {
  const three = await copyOf({ from: sharded });
  const index = JSON.parse(await readFile(join(three, 'model.safetensors.index.json'), 'utf8'));
  t.is(new Set(Object.values(index.weight_map)).size, 3);
  const a = await loadBase();
  const folder = await openHfFolder(three);
  t.is(new Set([...folder.weights.values()].map((e) => e.file)).size, 3, 'the weights come from the 3 shards');
  const b = await loadHfModel(folder);
  t.deepEqual([...b.model.weights.keys()].sort(), [...a.model.weights.keys()].sort());
  for (const name of a.model.weights.keys()) sameValues(t, b.model.weight(name), a.model.weight(name), name);
  t.is(b.hash, a.hash, 'the hash is of the weights, not of how they are split');
});

for (const dtype of ['BF16', 'F16'] as const) {
  test(`a ${dtype} folder loads: its weights are the F32 folder's rounded to ${dtype}, its dtype ${dtype}`, async (t) => {
    const dir = join(root, `dtype-${dtype}`);
    await writeTinyFolder(dir, { ...SHAPE, seed: 1, dtype });
    await writeFile(join(dir, 'tokenizer.json'), smallTokenizer);
    const folder = await openHfFolder(dir);
    t.is(folder.dtype, dtype);
    t.is(folder.config.dtype, dtype === 'BF16' ? 'bfloat16' : 'float16');
    for (const e of folder.weights.values()) t.is(e.dtype, dtype);
    const { model, hash } = await loadHfModel(folder);
    let differs = 0;
    for (const w of baseTensors) {
      const f32 = (await w.values()) as Float32Array;
      const want = toFloat32(fromFloat32(f32, dtype as FloatDtype), dtype);
      sameValues(t, model.weight(w.name), want, w.name);
      if (model.weight(w.name).some((v, i) => v !== f32[i])) differs++;
    }
    t.true(differs > 0, 'rounding changed some values (the comparison is not vacuous)');
    t.not(hash, (await loadBase()).hash);
  });
}

test('extra tensors Transformers ignores are accepted: rotary_emb.inv_freq, and lm_head.weight in a tied model', async (t) => {
  const dir = await copyOf();
  const embed = baseTensors.find((w) => w.name === 'model.embed_tokens.weight')!;
  await writeSafetensors(join(dir, 'model.safetensors'), [
    ...baseTensors,
    {
      name: 'model.layers.0.self_attn.rotary_emb.inv_freq',
      dtype: 'F32',
      shape: [8],
      values: () => Float32Array.from({ length: 8 }, (_, i) => 1e6 ** (-i / 8)),
    },
    { ...embed, name: 'lm_head.weight' },
  ]);
  const folder = await openHfFolder(dir);
  t.false(folder.weights.has('lm_head.weight'));
  t.false(folder.weights.has('model.layers.0.self_attn.rotary_emb.inv_freq'));
  const { model } = await loadHfModel(folder);
  sameValues(t, model.head, (await embed.values()) as Float32Array, 'the head');
});

// ─── The folder itself ───────────────────────────────────────────────────────────────────────

test('no such folder is an HfFolderError naming it', async (t) => {
  const dir = join(root, 'does-not-exist');
  await refused(t, openHfFolder(dir), HfFolderError, dir, null, /no such folder/);
  await refused(t, openHfChat(dir), HfFolderError, dir, null, /no such folder/);
});

test('a file instead of a folder is refused as not a folder', async (t) => {
  const file = join(base, 'config.json');
  await refused(t, openHfFolder(file), HfFolderError, file, null, /is not a folder/);
});

/** `promise`, or a failure after `ms`: a read that blocks (on a FIFO) fails the test instead of hanging it. */
function guarded<T>(promise: Promise<T>, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still reading after ${ms} ms: it blocked`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A copy of `from` with a FIFO in place of `name`. */
async function withFifo(name: string, from = base): Promise<string> {
  const dir = await copyOf({ from });
  await rm(join(dir, name));
  execFileSync('mkfifo', [join(dir, name)]);
  return dir;
}

test('a FIFO in place of any file a folder names is refused as not a file, without blocking on it', async (t) => {
  const fifo = /is not a file \(it is a FIFO\)/;
  for (const name of ['model.safetensors', 'chat_template.jinja', 'tokenizer_config.json', 'generation_config.json']) {
    const dir = name === 'chat_template.jinja' ? await copyOf() : await withFifo(name);
    if (name === 'chat_template.jinja') execFileSync('mkfifo', [join(dir, name)]);
    const cls = name.endsWith('.safetensors') ? ModelFileError : HfFolderError;
    await refused(t, guarded(openHfFolder(dir)), cls, join(dir, name), null, fifo);
  }
  const shard = (await readdir(sharded)).find((n) => n.endsWith('.safetensors'))!;
  const dir = await withFifo(shard, sharded);
  await refused(t, guarded(openHfFolder(dir)), ModelFileError, join(dir, shard), null, fifo);
  const index = await withFifo('model.safetensors.index.json', sharded);
  await refused(
    t,
    guarded(openHfFolder(index)),
    HfFolderError,
    join(index, 'model.safetensors.index.json'),
    null,
    fifo,
  );
  const ckpt = await copyOf();
  execFileSync('mkfifo', [join(ckpt, 'checkpoint.json')]);
  await refused(t, guarded(readHfCheckpoint(ckpt)), HfFolderError, join(ckpt, 'checkpoint.json'), null, fifo);
});

// ─── config.json ─────────────────────────────────────────────────────────────────────────────

test('config.json missing is an HfFolderError naming config.json', async (t) => {
  const dir = await copyOf();
  await unlink(join(dir, 'config.json'));
  await refused(t, openHfFolder(dir), HfFolderError, join(dir, 'config.json'), null, /no such file/);
});

test('config.json that is not JSON, not an object, or not a file is refused naming config.json', async (t) => {
  const dir = await copyOf();
  const file = join(dir, 'config.json');
  await writeFile(file, '{"architectures": ["Qwen3ForCausalLM"],');
  await refused(t, openHfChat(dir), HfFolderError, file, null, /is not JSON/);
  await writeFile(file, '["Qwen3ForCausalLM"]');
  await refused(t, openHfChat(dir), HfFolderError, file, null, /is not a JSON object/);
  await unlink(file);
  await mkdir(file);
  await refused(t, openHfChat(dir), HfFolderError, file, null, /is not a file/);
});

test('an architecture this build does not run (GPT2LMHeadModel) is a ModelConfigError naming architectures and the ones it runs', async (t) => {
  const dir = await withConfig((c) => {
    c.architectures = ['GPT2LMHeadModel'];
  });
  await refused(
    t,
    openHfFolder(dir),
    ModelConfigError,
    join(dir, 'config.json'),
    'architectures',
    /\["GPT2LMHeadModel"\] is not an architecture this build runs \(LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM\)/,
  );
  const none = await withConfig((c) => {
    delete c.architectures;
  });
  await refused(t, openHfChat(none), ModelConfigError, join(none, 'config.json'), 'architectures', /undefined is not/);
});

test('rope_scaling of a type not implemented (yarn) is refused naming rope_scaling (and rope_parameters, Transformers v5)', async (t) => {
  const dir = await withConfig((c) => {
    c.rope_scaling = { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32768 };
  });
  await refused(
    t,
    openHfFolder(dir),
    ModelConfigError,
    join(dir, 'config.json'),
    'rope_scaling',
    /rope type "yarn" is not implemented/,
  );
  const v5 = await withConfig((c) => {
    c.rope_parameters = { rope_type: 'yarn', rope_theta: 1e6, factor: 4 };
  });
  await refused(t, openHfChat(v5), ModelConfigError, join(v5, 'config.json'), 'rope_parameters', /"yarn"/);
});

test('hidden_act other than silu (gelu) is refused naming hidden_act', async (t) => {
  const dir = await withConfig((c) => {
    c.hidden_act = 'gelu';
  });
  await refused(t, openHfFolder(dir), ModelConfigError, join(dir, 'config.json'), 'hidden_act', /"gelu": only silu/);
});

test('num_key_value_heads that does not divide num_attention_heads is refused naming num_key_value_heads', async (t) => {
  const dir = await withConfig((c) => {
    c.num_attention_heads = 4;
    c.num_key_value_heads = 3;
  });
  await refused(
    t,
    openHfFolder(dir),
    ModelConfigError,
    join(dir, 'config.json'),
    'num_key_value_heads',
    /3 does not divide num_attention_heads \(4\)/,
  );
});

test('a vocab_size smaller than the tokenizer (151,669 tokens) is refused naming tokenizer.json and vocab_size', async (t) => {
  const dir = await withConfig(
    (c) => {
      c.vocab_size = 151_000;
    },
    { realTokenizer: true },
  );
  await refused(
    t,
    openHfChat(dir),
    HfFolderError,
    join(dir, 'tokenizer.json'),
    null,
    /has 151669 tokens but the model \(config.json vocab_size\) has 151000 rows/,
  );
});

test('sizes past the limits, and sizes that are not positive integers, are refused naming the field', async (t) => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['num_hidden_layers', 100_000, /100000 is not an integer from 1 to 512/],
    ['hidden_size', LLAMA_LIMITS.hiddenSize * 2, /is not an integer from 1 to 32768/],
    ['vocab_size', 1 << 22, /is not an integer from 1 to 2097152/],
    ['intermediate_size', 1 << 20, /is not an integer from 1 to/],
    ['num_attention_heads', 0, /0 is not an integer/],
    ['head_dim', 4096, /4096 is not an integer from 1 to 1024/],
    ['max_position_embeddings', 1 << 30, /is not an integer from 1 to 16777216/],
    ['num_hidden_layers', '2', /"2" is not an integer/],
    ['hidden_size', 32.5, /32.5 is not an integer/],
    ['intermediate_size', -48, /-48 is not an integer/],
    ['hidden_size', null, /is missing/],
  ];
  for (const [field, value, problem] of cases) {
    const dir = await withConfig((c) => {
      c[field] = value;
    });
    await refused(t, openHfChat(dir), ModelConfigError, join(dir, 'config.json'), field, problem);
  }
});

test("a config whose weights would pass this machine's memory even in 16 bits is refused before any weight (or the tokenizer) is read", async (t) => {
  const dir = await withConfig((c) => {
    c.hidden_size = 32768; // the embedding: 151,936 × 32,768 = 4.98 × 10⁹ floats
    c.intermediate_size = 131072; // the MLP: 3 × 32,768 × 131,072 = 12.9 × 10⁹: 35.8 GB in all in 16 bits
  });
  // Neither the weights nor the tokenizer could be read: the refusal comes first.
  await replaceFile(join(dir, 'model.safetensors'), 'not a safetensors file');
  await writeFile(join(dir, 'tokenizer.json'), 'not JSON');
  const count = parameterCount({
    ...llamaConfigFromHf(JSON.parse(await readFile(join(base, 'config.json'), 'utf8')), 'config.json'),
    hiddenSize: 32768,
    intermediateSize: 131072,
  });
  t.true(count * 2 > maxWeightBytes());
  await refused(
    t,
    openHfFolder(dir),
    ModelConfigError,
    join(dir, 'config.json'),
    null,
    new RegExp(`the model has ${count} parameters, \\d+\\.\\d GB in 16 bits; this machine holds at most`),
  );
});

test('an eos_token_id past the vocabulary (config.json or generation_config.json) is refused naming eos_token_id', async (t) => {
  const dir = await copyOf();
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [151645, QWEN3_VOCAB] }));
  await refused(
    t,
    openHfChat(dir),
    ModelConfigError,
    join(dir, 'config.json'),
    'eos_token_id',
    /token id 151936 is past the vocabulary \(151936\)/,
  );
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: -1 }));
  await refused(
    t,
    openHfChat(dir),
    ModelConfigError,
    join(dir, 'generation_config.json'),
    'eos_token_id',
    /-1 is not a token id/,
  );
});

// ─── Weights ─────────────────────────────────────────────────────────────────────────────────

test('a missing weight is refused naming the folder and the weight (lm_head.weight too, when the model is not tied)', async (t) => {
  const dir = await copyOf();
  const name = 'model.layers.0.mlp.down_proj.weight';
  await writeSafetensors(
    join(dir, 'model.safetensors'),
    baseTensors.filter((w) => w.name !== name),
  );
  await refused(
    t,
    openHfFolder(dir),
    HfFolderError,
    dir,
    name,
    /the config needs this weight, and no safetensors file has it/,
  );
  const untied = await withConfig((c) => {
    c.tie_word_embeddings = false;
  });
  await refused(t, openHfFolder(untied), HfFolderError, untied, 'lm_head.weight', /the config needs this weight/);
});

test('an extra tensor the config has no place for is refused naming the file and the tensor', async (t) => {
  const dir = await copyOf();
  const file = join(dir, 'model.safetensors');
  const extra = baseTensors.find((w) => w.name === 'model.layers.0.mlp.up_proj.weight')!;
  await writeSafetensors(file, [...baseTensors, { ...extra, name: 'model.layers.1.mlp.up_proj.weight' }]);
  await refused(
    t,
    openHfFolder(dir),
    HfFolderError,
    file,
    'model.layers.1.mlp.up_proj.weight',
    /is not a weight of Qwen3ForCausalLM with this config/,
  );
});

test('a misshapen tensor (the same size, transposed) is refused naming the file, the weight, both shapes', async (t) => {
  const dir = await copyOf();
  const file = join(dir, 'model.safetensors');
  const name = 'model.layers.0.self_attn.k_proj.weight';
  await writeSafetensors(
    file,
    baseTensors.map((w) => (w.name === name ? { ...w, shape: [...w.shape].reverse() } : w)),
  );
  await refused(t, openHfFolder(dir), HfFolderError, file, name, /has shape \[32,16\]; the config needs \[16,32\]/);
});

test('a weight stored as I8 (quantized) is refused naming the file, the weight and the dtype', async (t) => {
  const dir = await copyOf();
  const file = join(dir, 'model.safetensors');
  const name = 'model.layers.0.mlp.gate_proj.weight';
  const tensors = [];
  for (const w of baseTensors) {
    const n = w.shape.reduce((a, b) => a * b, 1);
    tensors.push(
      w.name === name
        ? { name, dtype: 'I8', shape: w.shape, bytes: new Uint8Array(n).fill(3) }
        : { name: w.name, dtype: 'F32', shape: w.shape, bytes: fromFloat32((await w.values()) as Float32Array, 'F32') },
    );
  }
  await writeRawSafetensors(file, tensors);
  await refused(t, openHfFolder(dir), HfFolderError, file, name, /is I8; weights are read as F32, F16 or BF16/);
});

test('no model.safetensors and no index is refused naming the folder (pickled .bin weights are not read)', async (t) => {
  const dir = await copyOf();
  await unlink(join(dir, 'model.safetensors'));
  await writeFile(join(dir, 'pytorch_model.bin'), 'a pickle');
  await refused(
    t,
    openHfFolder(dir),
    HfFolderError,
    dir,
    null,
    /has no model.safetensors or model.safetensors.index.json \(weights are read from safetensors only/,
  );
  const chat = await openHfChat(dir);
  t.is(chat.config.hiddenSize, 32, 'openHfChat does not look at the weights');
  t.false('weights' in chat);
});

test('a truncated model.safetensors is a ModelFileError naming the file', async (t) => {
  const dir = await copyOf();
  const file = join(dir, 'model.safetensors');
  const header = await readSafetensorsHeader(file);
  const last = header.tensors.reduce((a, b) => (b.end > a.end ? b : a));
  await copyFile(file, `${file}.own`); // its own file, not the link the base folder shares
  await rename(`${file}.own`, file);
  await truncate(file, last.end - 100);
  await refused(
    t,
    openHfFolder(dir),
    ModelFileError,
    file,
    last.name,
    /past the .* bytes of data the file holds \(truncated\?\)/,
  );
});

// ─── Sharded folders ─────────────────────────────────────────────────────────────────────────

const indexOf = (dir: string) => join(dir, 'model.safetensors.index.json');

test('an index naming a shard outside the folder ("../x.safetensors", absolute, in a subfolder, not .safetensors) is refused, the outside file never read', async (t) => {
  const name = 'model.norm.weight';
  // A real safetensors file outside the folder holding the tensor: it must not be read.
  const norm = baseTensors.find((w) => w.name === name)!;
  await writeSafetensors(join(root, 'x.safetensors'), [norm]);
  for (const shard of [
    '../x.safetensors',
    join(root, 'x.safetensors'),
    'sub/x.safetensors',
    '..',
    'pytorch_model.bin',
    7,
  ]) {
    const dir = await copyOf({ from: sharded });
    await editJson(indexOf(dir), (index) => {
      index.weight_map[name] = shard;
    });
    await refused(
      t,
      openHfFolder(dir),
      HfFolderError,
      indexOf(dir),
      `weight_map.${name}`,
      /is not a .safetensors file of this folder/,
    );
  }
});

test('an index naming a shard that is missing is a ModelFileError naming the shard', async (t) => {
  const dir = await copyOf({ from: sharded });
  const shard = join(dir, 'model-00002-of-00003.safetensors');
  await unlink(shard);
  await refused(t, openHfFolder(dir), ModelFileError, shard, null, /no such file/);
});

test('an index that puts a tensor in the wrong shard is refused naming the index and the tensor', async (t) => {
  const dir = await copyOf({ from: sharded });
  const index = JSON.parse(await readFile(indexOf(dir), 'utf8'));
  const [name, shard] = Object.entries(index.weight_map as { [k: string]: string }).find(
    ([, f]) => f === 'model-00001-of-00003.safetensors',
  )!;
  await editJson(indexOf(dir), (i) => {
    i.weight_map[name] = 'model-00002-of-00003.safetensors';
  });
  await refused(
    t,
    openHfFolder(dir),
    HfFolderError,
    indexOf(dir),
    'weight_map',
    new RegExp(`${shard.replaceAll('.', '\\.')} holds ${name.replaceAll('.', '\\.')}, which the index puts elsewhere`),
  );
});

test('an index naming a tensor its shard does not hold is refused naming the shard and the tensor', async (t) => {
  const dir = await copyOf({ from: sharded });
  await editJson(indexOf(dir), (index) => {
    index.weight_map['model.layers.0.mlp.extra.weight'] = 'model-00003-of-00003.safetensors';
  });
  await refused(
    t,
    openHfFolder(dir),
    HfFolderError,
    join(dir, 'model-00003-of-00003.safetensors'),
    'model.layers.0.mlp.extra.weight',
    /is not in the file, though the index says it is/,
  );
});

test('an index that is not JSON, or whose weight_map is not an object, is refused naming the index', async (t) => {
  const dir = await copyOf({ from: sharded });
  await writeFile(indexOf(dir), '{"weight_map": ');
  await refused(t, openHfFolder(dir), HfFolderError, indexOf(dir), null, /is not JSON/);
  await writeFile(indexOf(dir), JSON.stringify({ weight_map: ['model-00001-of-00003.safetensors'] }));
  await refused(t, openHfFolder(dir), HfFolderError, indexOf(dir), 'weight_map', /is not an object of tensor → file/);
});

// ─── tokenizer.json and the chat template ────────────────────────────────────────────────────

test('a tokenizer.json that is missing or not JSON is refused naming tokenizer.json', async (t) => {
  const dir = await copyOf();
  const file = join(dir, 'tokenizer.json');
  await writeFile(file, 'version: 1.0\nmodel: BPE\n');
  await refused(t, openHfChat(dir), HfFolderError, file, null, /is not JSON/);
  await unlink(file);
  await refused(t, openHfFolder(dir), HfFolderError, file, null, /no such file/);
});

test('a tokenizer.json without a model, or whose model is not BPE, is refused naming the field', async (t) => {
  const small = JSON.parse(smallTokenizer);
  const cases: Array<[(json: any) => void, string, RegExp]> = [
    [(j) => delete j.model, 'model', /is missing/],
    [(j) => (j.model = null), 'model', /is missing/],
    [(j) => (j.model.type = 'WordPiece'), 'model.type', /"WordPiece": only BPE tokenizers are supported/],
    [(j) => delete j.model.type, 'model.type', /undefined: only BPE/],
    [(j) => (j.model.vocab = ['a', 'b']), 'model.vocab', /is not an object of token → id/],
    [(j) => (j.model.vocab = { a: -1 }), 'model.vocab', /token "a" has id -1/],
    [(j) => (j.added_tokens = { id: 1 }), 'added_tokens', /is not a list/],
    [(j) => (j.added_tokens = [{ id: 'x', content: 'y' }]), 'added_tokens[0]', /needs an integer "id"/],
  ];
  for (const [edit, field, problem] of cases) {
    const dir = await copyOf();
    const json = structuredClone(small);
    edit(json);
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(json));
    await refused(t, openHfChat(dir), HfFolderError, join(dir, 'tokenizer.json'), field, problem);
  }
});

test('a tokenizer.json with more merges than MAX_TOKENIZER_ENTRIES is refused from its text, before it is parsed', async (t) => {
  const dir = await copyOf();
  const json = JSON.parse(smallTokenizer);
  // 12 MB: a merge list is the fastest of the three lists to write past the limit; the scan is the same.
  json.model.merges = Array.from({ length: MAX_TOKENIZER_ENTRIES + 1 }, () => 'a b');
  const file = join(dir, 'tokenizer.json');
  // What follows the merges is not JSON: the refusal names the count, so it came before JSON.parse.
  await writeFile(file, `${JSON.stringify(json)} not JSON`);
  const started = performance.now();
  const error = await t.throwsAsync(openHfChat(dir), { instanceOf: TokenizerSizeError });
  t.like(error, { file, field: 'model.merges', count: MAX_TOKENIZER_ENTRIES + 1, limit: MAX_TOKENIZER_ENTRIES });
  t.is(
    error!.message,
    `${file} (model.merges): holds at least 2097153 entries; the most is 2097152 (MAX_TOKENIZER_ENTRIES, a model's most rows)`,
  );
  t.true(performance.now() - started < 10_000);
  t.true(error instanceof HfFolderError, 'callers that handle a bad folder handle this one');
});

test('the count scan reads strings as JSON does (escaped quotes, brackets and commas in them) and counts only the three lists', (t) => {
  const vocab = { 'a"b': 0, 'c,d': 1, '[{': 2, '\\': 3, '}]': 4 };
  const text = JSON.stringify({
    extra: { vocab: [1, 2, 3, 4, 5, 6, 7], model: { vocab: { x: 1, y: 2, z: 3, w: 4, v: 5, u: 6 } } },
    model: { type: 'BPE', vocab, merges: ['a b', 'c d'], nested: { vocab: { p: 1, q: 2, r: 3, s: 4, u: 5, v: 6 } } },
    added_tokens: [{ id: 5, content: ',,,,,,' }],
  });
  checkTokenizerCounts(text, 'x.json', 5);
  t.throws(() => checkTokenizerCounts(text, 'x.json', 4), {
    instanceOf: TokenizerSizeError,
    message:
      "x.json (model.vocab): holds at least 5 entries; the most is 4 (MAX_TOKENIZER_ENTRIES, a model's most rows)",
  });
  const added = JSON.stringify({ model: { vocab: {} }, added_tokens: [{ id: 0 }, { id: 1 }, { id: 2 }] });
  t.throws(() => checkTokenizerCounts(added, 'x.json', 2), {
    instanceOf: TokenizerSizeError,
    message: /\(added_tokens\)/,
  });
  checkTokenizerCounts('{"model": {"vocab": {"a": 1', 'x.json', 1);
  t.pass('text cut short is left for JSON.parse to refuse');
});

test("a tokenizer.json with more tokens than the model's rows is refused before it is built (not after)", async (t) => {
  const dir = await copyOf();
  const json = JSON.parse(smallTokenizer);
  // 300,000 entries, past Qwen3's 151,936 rows, and a pre-tokenizer the tokenizer library cannot
  // build: the refusal names the rows, so the count was checked before the build was tried.
  for (let i = 256; i < 300_000; i++) json.model.vocab[`tok${i}`] = i;
  json.pre_tokenizer = { type: 'Unknown' };
  const file = join(dir, 'tokenizer.json');
  await writeFile(file, JSON.stringify(json));
  await refused(
    t,
    openHfChat(dir),
    HfFolderError,
    file,
    null,
    /has 300000 tokens but the model \(config.json vocab_size\) has 151936 rows/,
  );
  // With the rows for it, the same file gets as far as the build, which fails.
  await editJson(join(dir, 'config.json'), (c) => {
    c.vocab_size = 300_000;
  });
  await refused(t, openHfChat(dir), HfFolderError, file, null, /cannot be built into a tokenizer/);
});

test('a chat template that does not parse is refused naming the file and chat_template (tokenizer_config.json or chat_template.jinja)', async (t) => {
  const dir = await copyOf();
  const configFile = join(dir, 'tokenizer_config.json');
  await editJson(configFile, (c) => {
    c.chat_template = '{% for message in messages %}{{ message.content }';
  });
  await refused(t, openHfChat(dir), HfFolderError, configFile, 'chat_template', /does not parse/);
  const jinja = join(dir, 'chat_template.jinja');
  await writeFile(jinja, '{% if messages %}hello');
  await refused(t, openHfFolder(dir), HfFolderError, jinja, 'chat_template', /does not parse/);
  await editJson(configFile, (c) => {
    c.chat_template = [{ name: 'tool_use', template: '{{ messages }}' }];
  });
  await unlink(jinja);
  await refused(t, openHfChat(dir), HfFolderError, configFile, 'chat_template', /has no template named "default"/);
  await editJson(configFile, (c) => {
    c.chat_template = 42;
  });
  await refused(t, openHfChat(dir), HfFolderError, configFile, 'chat_template', /is neither a string nor a list/);
});

test('a template that calls raise_exception opens, and rendering through folder.template.render is a ChatTemplateError with its message', async (t) => {
  const dir = await copyOf();
  const configFile = join(dir, 'tokenizer_config.json');
  await editJson(configFile, (c) => {
    c.chat_template =
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" +
      '{{ m.role }}: {{ m.content }}\n{% endfor %}';
  });
  const folder = await openHfFolder(dir);
  t.is(
    folder.template!.render({ messages: [{ role: 'user', content: 'hi' }], addGenerationPrompt: false }),
    'user: hi\n',
  );
  const error = t.throws(
    () =>
      folder.template!.render({
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
        addGenerationPrompt: true,
      }),
    { instanceOf: ChatTemplateError },
  );
  t.is(error?.file, configFile);
  t.regex(error?.message ?? '', /System role not supported/);
  t.true(error?.message.includes(configFile));
});
