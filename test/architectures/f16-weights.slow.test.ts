import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Float16Weight } from '../../src/architectures/llama/model.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';
import { kernelLogits } from '../helpers/kernel-logits.ts';

// An F16 checkpoint's matrices stay half precision in memory and in the decode kernel, widened lane
// by lane as they are loaded (subnormal halves included: weights of std 0.02 have many): the logits
// are the same bits as the float32 widening's, on any number of threads.

let root: string;
let dir: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-f16-'));
  dir = join(root, 'qwen3-f16');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 42,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 70,
    tie: true,
    dtype: 'F16',
    seed: 5,
  });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const load = async (dtype: 'auto' | 'F32') => loadHfModel(await openHfFolder(dir), { dtype });

test('an F16 folder keeps its matrices in half precision; the kernel gives the float32 widening’s logits, bit for bit, on 1 and 2 threads', async (t) => {
  const [kept, wide] = [await load('auto'), await load('F32')];
  t.is(kept.model.matrixFormat, 'F16');
  t.is(wide.model.matrixFormat, null);
  t.false(kept.model.bfloat16);
  t.true(kept.model.stored('model.layers.0.mlp.down_proj.weight') instanceof Float16Weight);
  t.true(kept.model.stored('model.layers.0.input_layernorm.weight') instanceof Float32Array);
  t.true(kept.model.weightBytes < 0.51 * wide.model.weightBytes);
  t.is(kept.hash, wide.hash);
  const subnormal = [...kept.model.weight('model.layers.0.mlp.down_proj.weight')].some(
    (v) => v !== 0 && Math.abs(v) < 2 ** -14,
  );
  t.true(subnormal, 'the weights hold subnormal halves');
  for (const name of wide.model.weights.keys()) t.deepEqual(kept.model.weight(name), wide.model.weight(name), name);
  const reference = await kernelLogits(wide.model, 1);
  t.deepEqual(await kernelLogits(kept.model, 1), reference);
  t.deepEqual(await kernelLogits(kept.model, 2), reference);
});
