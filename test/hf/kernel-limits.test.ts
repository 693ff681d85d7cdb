import test from 'ava';
import { open, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelConfigError } from '../../src/architectures/errors.ts';
import {
  llamaConfigFromHf,
  llamaWeights,
  maxWeightBytes,
  parameterCount,
} from '../../src/architectures/llama/config.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { checkLoraKernelFits, checkTfjsHeapFits } from '../../src/rl/hf-trainable.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// How big a model may be: what this machine's RAM holds (the weights once, in 80% of it), a BF16
// checkpoint's matrices in bfloat16; past one WebAssembly memory (4 GiB) the decode kernel splits the
// model between several. The folders here are sparse files (a header, then a hole): what is checked
// is decided before a weight is read. The RAM is stated (8 GB: 6.4 GB of weights), so the figures do
// not depend on the machine.
process.env.AGENT_R1_MEMORY_BYTES = '8000000000';

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

/** Qwen2.5-3B's shape: 3.09B parameters, tied. */
const QWEN2_5_3B = {
  architectures: ['Qwen2ForCausalLM'],
  hidden_size: 2048,
  intermediate_size: 11008,
  num_hidden_layers: 36,
  num_attention_heads: 16,
  num_key_value_heads: 2,
  head_dim: undefined,
};

test('with 8 GB of RAM, Qwen3-1.7B and Qwen2.5-3B in BF16 open; 1.7B widened to float32 is refused with the numbers before a weight is read', async (t) => {
  t.is(maxWeightBytes(), 6_400_000_000);
  const dir = await sparseFolder('qwen3-1.7b-bf16', QWEN3_1_7B, 'BF16');
  const folder = await openHfFolder(dir);
  t.is(folder.dtype, 'BF16');
  t.is(parameterCount(folder.config), 1_720_574_976);
  const error = await t.throwsAsync(loadHfModel(folder, { dtype: 'F32' }), { instanceOf: ModelConfigError });
  t.regex(error!.message, /the weights take 6\.88 GB held in float32; this machine holds at most 6\.40 GB of weights/);
  const qwen25 = await openHfFolder(await sparseFolder('qwen2.5-3b-bf16', QWEN2_5_3B, 'BF16'));
  t.is(parameterCount(qwen25.config), 3_085_938_688);
});

test('the same model in F32 is refused when the folder opens, naming the sizes', async (t) => {
  const dir = await sparseFolder('qwen3-1.7b-f32', QWEN3_1_7B, 'F32');
  const error = await t.throwsAsync(openHfFolder(dir), { instanceOf: ModelConfigError });
  t.is((error as ModelConfigError).file, join(dir, 'config.json'));
  t.regex(
    error!.message,
    /the weights take 6\.88 GB held in float32; .*a BF16 or F16 checkpoint loaded as it is takes half/,
  );
});

test('a config past what the RAM holds in 16 bits is refused before anything else is read', async (t) => {
  const dir = await sparseFolder('too-big', QWEN3_1_7B, 'BF16');
  const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
  await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: 100 }));
  await writeFile(join(dir, 'model.safetensors'), 'not a safetensors file');
  await writeFile(join(dir, 'tokenizer.json'), 'not JSON');
  await t.throwsAsync(openHfFolder(dir), {
    instanceOf: ModelConfigError,
    message: /the model has 5\d{9} parameters, 1\d\.\d GB in 16 bits; this machine holds at most 6\.4 GB of weights/,
  });
});

test.serial(
  'LoRA over a frozen base: the weights once, the projections twice more (W and Wᵀ) and the head in float32 must fit; on 24 GiB Qwen2.5-3B in BF16 does, Qwen3-4B is refused with the numbers',
  async (t) => {
    const qwen25 = await openHfFolder(await sparseFolder('lora-qwen2.5-3b', QWEN2_5_3B, 'BF16'));
    t.throws(() => checkLoraKernelFits(qwen25, 'runs/qwen2.5-3b'), {
      message: /19\.8 GB; this machine holds at most 6\.4 GB of weights \(80% of its 8\.0 GB of RAM\)/,
    });
    process.env.AGENT_R1_MEMORY_BYTES = '25300000000'; // this machine's 24 GiB
    try {
      const qwen3 = await openHfFolder(
        await sparseFolder(
          'lora-qwen3-4b',
          {
            hidden_size: 2560,
            intermediate_size: 9728,
            num_hidden_layers: 36,
            num_attention_heads: 32,
            num_key_value_heads: 8,
            head_dim: 128,
          },
          'BF16',
        ),
      );
      t.notThrows(() => checkLoraKernelFits(qwen25, 'runs/qwen2.5-3b'));
      t.throws(() => checkLoraKernelFits(qwen3, 'runs/qwen3-4b'), {
        message:
          /training LoRA adapters over runs\/qwen3-4b holds its weights \(8\.0 GB\), the layers' projections twice more .*: 25\.\d GB; this machine holds at most 20\.2 GB/,
      });
    } finally {
      process.env.AGENT_R1_MEMORY_BYTES = '8000000000';
    }
  },
);

test('training a model whose float32 weights outgrow the wasm heap is refused up front; other backends are not limited here', (t) => {
  t.throws(() => checkTfjsHeapFits(1_720_574_976, 'wasm', 'runs/qwen3-1.7b'), {
    message:
      /training runs\/qwen3-1\.7b \(1721M parameters\) .* 6\.9 GB; the wasm backend's 4 GiB heap holds about 800M parameters .*--lora 8/,
  });
  t.notThrows(() => checkTfjsHeapFits(596_049_920, 'wasm', 'runs/qwen3-0.6b'));
  t.notThrows(() => checkTfjsHeapFits(1_720_574_976, 'tensorflow', 'runs/qwen3-1.7b'));
});
