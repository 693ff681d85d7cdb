import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Bfloat16Weight } from '../../src/architectures/llama/model.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';
import { kernelLogits } from '../helpers/kernel-logits.ts';

// A BF16 checkpoint's matrices stay bfloat16 in memory and in the decode kernel (half the bytes a
// step streams), widened lane by lane as they are loaded: the logits are the same bits as the
// float32 widening's, on any number of threads.

let root: string;
let dir: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-bf16-'));
  dir = join(root, 'qwen3-bf16');
  await writeTinyFolder(dir, FOLDER);
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

// Widths that are not multiples of 4 (hidden 42, intermediate 70): the dot products' tails run too.
const FOLDER = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 42,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 16,
  intermediate: 70,
  tie: false,
  dtype: 'BF16',
  seed: 3,
} as const;

const load = async (dtype: 'auto' | 'F32') => loadHfModel(await openHfFolder(dir), { dtype });
let loaded: Promise<{
  kept: Awaited<ReturnType<typeof load>>;
  wide: Awaited<ReturnType<typeof load>>;
  reference: Float32Array[];
}>;
/** The folder loaded both ways, once, and the float32 model's logits. */
const both = () =>
  (loaded ??= (async () => {
    const wide = await load('F32');
    return { kept: await load('auto'), wide, reference: await kernelLogits(wide.model, 1) };
  })());

test('a BF16 folder keeps its matrices in bfloat16 (half the bytes), its vectors in float32; dtype F32 widens all; one hash', async (t) => {
  const { kept, wide } = await both();
  t.true(kept.model.bfloat16);
  t.false(wide.model.bfloat16);
  t.true(kept.model.stored('model.layers.0.mlp.down_proj.weight') instanceof Bfloat16Weight);
  t.true(kept.model.stored('model.layers.0.input_layernorm.weight') instanceof Float32Array);
  for (const w of wide.model.weights.values()) t.true(w instanceof Float32Array);
  t.true(
    kept.model.weightBytes < 0.51 * wide.model.weightBytes,
    `${kept.model.weightBytes} vs ${wide.model.weightBytes}`,
  );
  t.is(kept.hash, wide.hash, 'the content hash is of the values, whatever they are held in');
  for (const name of wide.model.weights.keys())
    t.deepEqual(kept.model.weight(name), wide.model.weight(name), `${name}: the same float32 values`);
});

test('the kernel on bfloat16 matrices gives the same logits, bit for bit, as on their float32 widening, on 1 and 2 threads', async (t) => {
  const { kept: k, reference } = await both();
  const kept = k.model;
  t.deepEqual(await kernelLogits(kept, 1), reference);
  t.deepEqual(await kernelLogits(kept, 2), reference);
});

test('a bfloat16 matrix replaced (training writes float32 back) goes to the kernel in float32, the others widened', async (t) => {
  const { reference } = await both();
  const kept = (await load('auto')).model;
  const name = 'model.layers.1.self_attn.o_proj.weight';
  kept.setWeight(name, kept.weight(name));
  kept.revision++;
  t.false(kept.bfloat16);
  t.true(kept.stored(name) instanceof Float32Array);
  t.deepEqual(await kernelLogits(kept, 1), reference, 'the same values, now through the float32 path');
  // A real change moves the logits (the replacement is not ignored).
  const changed = kept.weight(name).map((v) => v * 2);
  kept.setWeight(name, changed);
  kept.revision++;
  t.notDeepEqual(await kernelLogits(kept, 1), reference);
  t.throws(() => kept.setWeight(name, new Float32Array(3)), { message: /has 2688 values; 3 were given/ });
});
