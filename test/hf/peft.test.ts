import test from 'ava';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { llamaConfigFromHf, LLAMA_LORA_TARGETS } from '../../src/architectures/llama/config.ts';
import { initLora } from '../../src/architectures/lora.ts';
import { readSafetensorsHeader } from '../../src/formats/safetensors.ts';
import { HfFolderError } from '../../src/hf/errors.ts';
import { loraWeights, readPeftAdapter, writePeftAdapter } from '../../src/hf/peft.ts';

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-peft-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const config = llamaConfigFromHf(
  {
    architectures: ['Qwen2ForCausalLM'],
    hidden_size: 32,
    intermediate_size: 48,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    vocab_size: 300,
    max_position_embeddings: 128,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: true,
  },
  'config.json',
);

async function written(name: string, targets: readonly string[] = LLAMA_LORA_TARGETS) {
  const dir = join(root, name);
  const lora = { rank: 4, alpha: 8, targets: [...targets] };
  const adapters = initLora(lora, loraWeights(config, targets), 3);
  for (const pair of adapters.pairs.values()) pair.B.forEach((_, i) => (pair.B[i] = Math.cos(i)));
  const { mkdir } = await import('node:fs/promises');
  await mkdir(dir, { recursive: true });
  await writePeftAdapter(dir, adapters, '/models/base');
  return { dir, adapters };
}

test("adapters round-trip through PEFT's files: its key names and shapes, its config", async (t) => {
  const { dir, adapters } = await written('round-trip');
  const back = await readPeftAdapter(dir, config);
  t.deepEqual(back, adapters);
  const header = await readSafetensorsHeader(join(dir, 'adapter_model.safetensors'));
  const q = header.tensors.filter((e) => e.name.includes('layers.0.self_attn.q_proj'));
  t.deepEqual(
    q.map((e) => [e.name, e.shape]),
    [
      ['base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight', [4, 32]],
      ['base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight', [32, 4]],
    ],
  );
  t.is(header.tensors.length, 2 * 7 * 2);
  t.like(JSON.parse(await readFile(join(dir, 'adapter_config.json'), 'utf8')), {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: '/models/base',
    r: 4,
    lora_alpha: 8,
    bias: 'none',
  });
});

test('an adapter that is not plain LoRA, or whose files disagree with its config or the model, is refused with the file and field', async (t) => {
  const edits: Array<[string, (j: { [k: string]: unknown }) => void, RegExp]> = [
    ['dora', (j) => (j.use_dora = true), /adapter_config\.json \(use_dora\): is true; only plain LoRA/],
    ['rslora', (j) => (j.use_rslora = true), /\(use_rslora\)/],
    ['bias', (j) => (j.bias = 'all'), /\(bias\)/],
    ['patterns', (j) => (j.rank_pattern = { q_proj: 8 }), /\(rank_pattern\): per-module ranks/],
    ['modules-to-save', (j) => (j.modules_to_save = ['lm_head']), /\(modules_to_save\)/],
    ['prompt-tuning', (j) => (j.peft_type = 'PROMPT_TUNING'), /\(peft_type\)/],
    ['targets', (j) => (j.target_modules = 'all-linear'), /\(target_modules\): must be a non-empty list/],
    ['no-targets', (j) => (j.target_modules = []), /\(target_modules\)/],
    ['zero-rank', (j) => (j.r = 0), /\(r\): must be an integer from 1/],
    ['alpha', (j) => (j.lora_alpha = -1), /\(lora_alpha\): must be > 0/],
    ['rank', (j) => (j.r = 3), /lora_A\.weight\): has shape \[4,32\]; rank 3 needs \[3,32\]/],
    ['fewer-targets', (j) => (j.target_modules = ['q_proj']), /k_proj\.lora_A\.weight\): adapts nothing/],
    [
      'more-targets',
      (j) => (j.target_modules = [...(j.target_modules as string[]), 'lm_head']),
      /\(target_modules\): "lm_head" is not a projection this build adapts/,
    ],
  ];
  for (const [name, edit, message] of edits) {
    const { dir } = await written(name);
    const file = join(dir, 'adapter_config.json');
    const json = JSON.parse(await readFile(file, 'utf8'));
    edit(json);
    await writeFile(file, JSON.stringify(json));
    await t.throwsAsync(readPeftAdapter(dir, config), { instanceOf: HfFolderError, message }, name);
  }
  const { dir } = await written('corrupt');
  await writeFile(join(dir, 'adapter_config.json'), '{"peft_type": "LORA",');
  await t.throwsAsync(readPeftAdapter(dir, config), { instanceOf: HfFolderError, message: /is not JSON/ });
  const { dir: truncated } = await written('truncated');
  const f = join(truncated, 'adapter_model.safetensors');
  await writeFile(f, (await readFile(f)).subarray(0, 200));
  await t.throwsAsync(readPeftAdapter(truncated, config), { message: /adapter_model\.safetensors/ });
  const { dir: missing } = await written('missing');
  await rm(join(missing, 'adapter_model.safetensors'));
  await t.throwsAsync(readPeftAdapter(missing, config), { message: /adapter_model\.safetensors/ });
});
