import test from 'ava';
import { open, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelConfigError } from '../../src/architectures/errors.ts';
import { llamaConfigFromHf, llamaWeights, parameterCount } from '../../src/architectures/llama/config.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { checkTfjsHeapFits } from '../../src/rl/hf-trainable.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// How big a model may be: the decode kernel holds the weights in one WebAssembly memory (4 GiB), a
// BF16 checkpoint's matrices in bfloat16, so Qwen3-1.7B in BF16 fits where it would not in float32.
// The folders here are sparse files (a header, then a hole): what is checked is decided before a
// weight is read.

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-limits-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Qwen3-1.7B's shape: 1.72B parameters, tied. */
const QWEN3_1_7B = {
  hidden_size: 2048,
  intermediate_size: 6144,
  num_hidden_layers: 28,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 128,
};

/** A folder with the real Qwen3 tokenizer and `sizes`, its model.safetensors a header over a hole of the right length. */
async function sparseFolder(name: string, sizes: object, dtype: 'BF16' | 'F32'): Promise<string> {
  const dir = join(root, name);
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 8,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    intermediate: 8,
    seed: 1,
  });
  const config = { ...JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')), ...sizes };
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
  const header: { [name: string]: { dtype: string; shape: number[]; data_offsets: [number, number] } } = {};
  let at = 0;
  for (const w of llamaWeights(llamaConfigFromHf(config, 'config.json'))) {
    const bytes = w.shape.reduce((a, b) => a * b, 1) * (dtype === 'BF16' ? 2 : 4);
    header[w.name] = { dtype, shape: [...w.shape], data_offsets: [at, at + bytes] };
    at += bytes;
  }
  const json = Buffer.from(JSON.stringify(header).padEnd(Math.ceil(JSON.stringify(header).length / 8) * 8));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  const file = await open(join(dir, 'model.safetensors'), 'w');
  await file.write(Buffer.concat([length, json]));
  await file.truncate(8 + json.length + at);
  await file.close();
  return dir;
}

test('Qwen3-1.7B in BF16 opens (3.44 GB held in bfloat16); widened to float32 it is refused with the numbers before a weight is read', async (t) => {
  const dir = await sparseFolder('qwen3-1.7b-bf16', QWEN3_1_7B, 'BF16');
  const folder = await openHfFolder(dir);
  t.is(folder.dtype, 'BF16');
  t.is(parameterCount(folder.config), 1_720_574_976);
  const error = await t.throwsAsync(loadHfModel(folder, { dtype: 'F32' }), { instanceOf: ModelConfigError });
  t.regex(error!.message, /the weights take 6\.88 GB held in float32; .* holds at most 3\.60 GB of them/);
  t.regex(error!.message, /about 900M parameters in float32, 1\.8B in 16 bits/);
});

test('the same model in F32 is refused when the folder opens, naming the sizes', async (t) => {
  const dir = await sparseFolder('qwen3-1.7b-f32', QWEN3_1_7B, 'F32');
  const error = await t.throwsAsync(openHfFolder(dir), { instanceOf: ModelConfigError });
  t.is((error as ModelConfigError).file, join(dir, 'config.json'));
  t.regex(error!.message, /the weights take 6\.88 GB held in float32/);
});

test('a config past 1.8B parameters is refused before anything else is read', async (t) => {
  const dir = await sparseFolder('too-big', QWEN3_1_7B, 'BF16');
  const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
  await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: 40 }));
  await writeFile(join(dir, 'model.safetensors'), 'not a safetensors file');
  await writeFile(join(dir, 'tokenizer.json'), 'not JSON');
  await t.throwsAsync(openHfFolder(dir), {
    instanceOf: ModelConfigError,
    message: /the model has 2\d{9} parameters; this build runs models of at most 1800000000 \(in bfloat16/,
  });
});

test('training a model whose float32 weights outgrow the wasm heap is refused up front; other backends are not limited here', (t) => {
  t.throws(() => checkTfjsHeapFits(1_720_574_976, 'wasm', 'runs/qwen3-1.7b'), {
    message:
      /training runs\/qwen3-1\.7b \(1721M parameters\) .* 6\.9 GB; the wasm backend's 4 GiB heap holds about 800M parameters .*--lora 8/,
  });
  t.notThrows(() => checkTfjsHeapFits(596_049_920, 'wasm', 'runs/qwen3-0.6b'));
  t.notThrows(() => checkTfjsHeapFits(1_720_574_976, 'tensorflow', 'runs/qwen3-1.7b'));
});
