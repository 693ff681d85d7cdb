import test from 'ava';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';
import { referenceGenerate, writeTinyFolder } from '../helpers/hf-folder.ts';
import { installLlamaCpp, llamaCpp } from '../helpers/llama-cpp.ts';

// The path a user takes with a model they brought, on the command line: SFT it (every weight), RL it
// with LoRA adapters, and ship each checkpoint. The exports (Hugging Face folder, GGUF) must continue
// a conversation as `model generate --model ckpt:…` does (exactly for full fine-tuning; LoRA's merged
// export within float32 rounding), in the reference written from Transformers' equations and in llama.cpp.

let root: string;
let base: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-train-export-'));
  installLlamaCpp();
  // Held out: a shape and seed no other test trains.
  base = join(root, 'qwen3');
  await writeTinyFolder(base, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 48,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 96,
    seed: 41,
    embedStd: 0.5,
  });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const ok = (r: ReturnType<typeof cli>) => {
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}`);
  return r;
};

/** What `model generate --model M` gives for the prompt, greedy. */
function generate(model: string, prompt: number[]): { ids: number[]; logprobs: number[] } {
  const r = ok(
    cli(['model', 'generate', '--model', model, '--prompt-ids', prompt.join(','), '--max-new-tokens', '12', '--json']),
  );
  return r.lastJson();
}

test('sft --init hf:DIR and train --algo grpo --init hf:DIR --lora 8 save checkpoints whose hf and gguf exports continue as the checkpoints do', async (t) => {
  t.timeout(1_200_000);
  const sft = join(root, 'sft');
  ok(
    cli(
      [
        'sft',
        '--scenario',
        'calculator',
        '--init',
        `hf:${base}`,
        '--episodes',
        '4',
        '--steps',
        '6',
        '--batch-size',
        '2',
        '--lr',
        '1e-2',
        '--eval-episodes',
        '0',
        '--out',
        sft,
        '--json',
      ],
      { timeout: 600_000 },
    ),
  );
  const rl = join(root, 'grpo');
  const train = ok(
    cli(
      [
        'train',
        '--scenario',
        'calculator',
        '--init',
        `hf:${base}`,
        '--lora',
        '8',
        '--algo',
        'grpo',
        '--steps',
        '2',
        '--tasks-per-step',
        '2',
        '--group',
        '2',
        '--lr',
        '1e-2',
        '--entropy-coef',
        '0.01',
        '--eval-episodes',
        '2',
        '--out',
        rl,
        '--json',
      ],
      { timeout: 600_000 },
    ),
  );
  t.regex(train.stderr, /LoRA: rank 8, alpha 16, \d+ trained parameters/);
  const lora = join(rl, 'final');
  t.deepEqual((await readdir(lora)).sort(), ['adapter_config.json', 'adapter_model.safetensors', 'checkpoint.json']);

  const prompt = ok(
    cli([
      'model',
      'tokenize',
      '--model',
      `hf:${base}`,
      '--text',
      '<|im_start|>user\nWhat is 6 × 7? Use the calculator.<|im_end|>\n<|im_start|>assistant\n',
      '--json',
    ]),
  ).lastJson().ids as number[];
  const baseline = generate(`hf:${base}`, prompt);
  const versions = new Set<string>();
  for (const [name, dir] of [
    ['sft (full fine-tuning)', sft],
    ['grpo (LoRA)', lora],
  ] as const) {
    const ckpt = `ckpt:${dir}`;
    const info = ok(cli(['model', 'info', '--model', ckpt, '--json'])).lastJson();
    t.false(versions.has(info.version), `${name}: the weights differ from the base and from the other checkpoint`);
    versions.add(info.version);
    const ours = generate(ckpt, prompt);
    t.notDeepEqual(ours.logprobs, baseline.logprobs, `${name}: continues differently from the base`);
    const hf = join(root, `${name.split(' ')[0]}-hf`);
    const gguf = join(root, `${name.split(' ')[0]}.gguf`);
    ok(cli(['model', 'export', '--model', ckpt, '--format', 'hf', '--out', hf]));
    ok(cli(['model', 'export', '--model', ckpt, '--format', 'gguf', '--out', gguf]));
    // The exported folder is the checkpoint's model: the same version, the same continuation.
    t.is(ok(cli(['model', 'info', '--model', `hf:${hf}`, '--json'])).lastJson().dtype, 'F32');
    const exported = generate(`hf:${hf}`, prompt);
    if (name.includes('LoRA')) {
      // The checkpoint computes the base and its adapters' product apart (x·Wᵀ + (x·Aᵀ)·Bᵀ, the base
      // kept as it was); the export holds W + B·A, rounded once: the same tokens, log-probs within rounding.
      t.deepEqual(exported.ids, ours.ids, `${name}: hf export through this project`);
      exported.logprobs.forEach((lp, i) =>
        t.true(Math.abs(lp - ours.logprobs[i]!) < 1e-5, `${name} export token ${i}: ${lp} vs ${ours.logprobs[i]}`),
      );
    } else t.deepEqual(exported, ours, `${name}: hf export through this project`);
    const reference = referenceGenerate(hf, prompt, 12);
    t.deepEqual(reference.ids, ours.ids, `${name}: reference implementation`);
    reference.logprobs.forEach((lp, i) =>
      t.true(Math.abs(lp - ours.logprobs[i]!) < 1e-4, `${name} reference token ${i}: ${lp} vs ${ours.logprobs[i]}`),
    );
    const eos = JSON.parse(await readFile(join(base, 'config.json'), 'utf8')).eos_token_id;
    const cpp = await llamaCpp(root, { model: gguf, generate: { prompt, maxTokens: 12, eos: [eos].flat() } });
    t.deepEqual(cpp.generated!.ids, ours.ids, `${name}: llama.cpp`);
    cpp.generated!.logprobs.forEach((lp, i) =>
      t.true(Math.abs(lp - ours.logprobs[i]!) < 1e-3, `${name} llama.cpp token ${i}: ${lp} vs ${ours.logprobs[i]}`),
    );
  }
});
