import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LLAMA_LORA_TARGETS } from '../../src/architectures/llama/config.ts';
import { LlamaModel } from '../../src/architectures/llama/model.ts';
import { initLora } from '../../src/architectures/lora.ts';
import { ModelConfigError } from '../../src/architectures/errors.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { loraWeights } from '../../src/hf/peft.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';
import { kernelLogits } from '../helpers/kernel-logits.ts';

// LoRA adapters computed beside the base in the decode kernel: the base as held (a BF16 one stays
// BF16), the logits those of the merged float32 weights within rounding, the same bits on 1 and 2 threads.

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-lora-kernel-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

for (const [architecture, dtype, targets] of [
  ['Qwen3ForCausalLM', 'BF16', LLAMA_LORA_TARGETS],
  ['Qwen2ForCausalLM', 'F32', ['q_proj', 'v_proj', 'down_proj']],
] as const) {
  test(`${architecture} ${dtype}, adapters on ${targets.join(',')}: the kernel's logits are the merged weights' within float32 rounding (1e-5 relative); 1 and 2 threads alike`, async (t) => {
    const dir = join(root, `${architecture}-${dtype}`);
    await writeTinyFolder(dir, {
      architecture,
      hidden: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      headDim: 8,
      intermediate: 44,
      tie: architecture === 'Qwen3ForCausalLM',
      seed: 8,
      dtype,
    });
    const { model } = await loadHfModel(await openHfFolder(dir));
    const lora = initLora({ rank: 3, alpha: 6, targets: [...targets] }, loraWeights(model.config, targets), 2);
    for (const pair of lora.pairs.values()) pair.B.forEach((_, i) => (pair.B[i] = Math.sin(i + 1) * 0.2));
    const merged = new LlamaModel(
      model.config,
      new Map([...model.weights.keys()].map((n) => [n, model.weight(n).slice()])),
      { contextLength: model.contextLength },
    );
    model.setAdapters(lora);
    model.revision++;
    t.is(model.matrixFormat, dtype === 'BF16' ? 'BF16' : null, 'the base is held as it was');
    // weight() gives the merged values (what export and the hash read).
    for (const name of lora.pairs.keys()) merged.setWeight(name, model.weight(name));
    t.notDeepEqual(
      model.weight('model.layers.1.self_attn.v_proj.weight'),
      model.baseWeight('model.layers.1.self_attn.v_proj.weight'),
    );
    const want = await kernelLogits(merged, 1);
    const got = await kernelLogits(model, 1);
    t.deepEqual(await kernelLogits(model, 2), got);
    let worst = 0;
    got.forEach((row, i) => row.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - want[i]![j]!)))));
    const scale = want.reduce((m, row) => row.reduce((a, v) => Math.max(a, Math.abs(v)), m), 0);
    t.true(worst < 1e-5 * Math.max(1, scale), `worst ${worst} at logits up to ${scale}`);
    const spread = want.reduce(
      (m, row) =>
        Math.max(m, row.reduce((a, v) => Math.max(a, v), -Infinity) - row.reduce((a, v) => Math.min(a, v), Infinity)),
      0,
    );
    t.true(spread > 0.01, 'the logits are not flat');
    // And without the adapters, the base's own logits again.
    model.setAdapters(null);
    model.revision++;
    t.notDeepEqual(await kernelLogits(model, 1), got);
  });
}

test('adapters that do not fit the model are refused with the weight named', async (t) => {
  const dir = join(root, 'refuse');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 16,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 8,
    intermediate: 24,
    tie: true,
    seed: 1,
  });
  const { model } = await loadHfModel(await openHfFolder(dir));
  const lora = initLora({ rank: 2, alpha: 4, targets: ['q_proj'] }, loraWeights(model.config, ['q_proj']), 1);
  const [name, pair] = [...lora.pairs][0]!;
  t.throws(() => model.setAdapters({ ...lora, pairs: new Map([[name, { A: pair.A.subarray(1), B: pair.B }]]) }), {
    instanceOf: ModelConfigError,
    message: /q_proj.weight.*A must be \[2, 16\]/,
  });
  t.throws(() => model.setAdapters({ ...lora, pairs: new Map([['model.norm.weight', pair]]) }), {
    instanceOf: ModelConfigError,
    message: /model.norm.weight.*not a matrix/,
  });
});
