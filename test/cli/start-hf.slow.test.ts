import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// start --init hf:DIR: the families' pipeline (demonstrations → SFT on the model's own template →
// GRPO → the held-out table) on a Hugging Face model, for a task family and for an agent folder;
// the same JSON table as the GPT's, the warm start and GRPO checkpoints Hugging Face folders.

const root = mkdtempSync(join(tmpdir(), 'agent-r1-start-hf-'));
const dir = join(root, 'tiny-qwen3');
test.before(async () => {
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 16,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 8,
    intermediate: 32,
    vocab: 151_680,
    initializerRange: 0.02,
    seed: 3,
  });
});
test.after.always(() => rmSync(root, { recursive: true, force: true }));

for (const [name, job] of [
  ['--scenario calculator', ['--scenario', 'calculator']],
  ['--agent examples/ai-sdk-agent', ['--agent', 'examples/ai-sdk-agent']],
] as const)
  test.serial(`start ${name} --init hf:DIR --quick: the table's JSON, and Hugging Face checkpoints`, (t) => {
    const out = join(root, name.replace(/\W+/g, '-'));
    const r = cli(['start', ...job, '--init', `hf:${dir}`, '--quick', '--out', out, '--json'], { timeout: 600_000 });
    t.is(r.code, 0, r.stderr);
    t.regex(r.stderr, new RegExp(`model hf:${dir}`));
    const table = r.lastJson() as { methods: { method: string }[]; seconds: { total: number } };
    const methods = table.methods.map((m) => m.method);
    t.true(methods.includes('Base Tool Call') && methods.includes('GRPO'), methods.join(', '));
    for (const ckpt of ['warm-start', 'grpo/final'])
      t.like(JSON.parse(readFileSync(join(out, ckpt, 'checkpoint.json'), 'utf8')), { format: 'agent-r1-hf' });
    t.true(existsSync(join(out, 'warm-start', 'model.safetensors')));
  });

test.serial(
  'start: an --init that is neither hf: nor ckpt:, or --lora without --init, is refused in one line (exit 2)',
  (t) => {
    const lora = cli(['start', '--scenario', 'calculator', '--lora', '8', '--quick', '--out', join(root, 'x')]);
    t.is(lora.code, 2);
    t.regex(lora.stderr, /--lora trains adapters on a Hugging Face model/);
    const bad = cli(['start', '--scenario', 'calculator', '--init', 'nope:x', '--out', join(root, 'x')]);
    t.is(bad.code, 2);
    t.regex(bad.stderr, /expected hf:DIR .* or ckpt:DIR/);
  },
);
