import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { mkdtemp, readFile, readdir, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../../src/policy/tfjs/model.ts';
import { trainTokenizer, SPECIAL_TOKENS } from '../../../src/policy/tfjs/tokenizer.ts';
import { CheckpointError, loadCheckpoint, modelHash, saveCheckpoint } from '../../../src/policy/tfjs/checkpoint.ts';
import { loadCheckpointPolicy } from '../../../src/policy/tfjs/tfjs-policy.ts';

const tokenizer = trainTokenizer(['<tool_call>{"name": "calculate"}</tool_call> <answer>42</answer> hello world'], {
  vocabSize: SPECIAL_TOKENS.length + 256 + 8,
});
const config = { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 32, dMlp: 32 };
let dir: string;
test.before(async () => {
  await initBackend('wasm');
  dir = await mkdtemp(join(tmpdir(), 'agent-r1-ckpt-'));
});
test.after.always(async () => {
  await rm(dir, { recursive: true, force: true });
});

const logitsOf = (m: GPTModel) =>
  tf.tidy(() => m.forward(tf.tensor2d([[1, 20, 30, 40]], [1, 4], 'int32')).logits.arraySync());

test('save → load gives identical logits, the same content hash, and a policy whose version is the hash', async (t) => {
  const model = new GPTModel(config, 11);
  const out = join(dir, 'a');
  const hash = await saveCheckpoint(out, model, tokenizer, { note: 'test' });
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.is(hash, await modelHash(model, tokenizer));
  const loaded = await loadCheckpoint(out);
  t.deepEqual(logitsOf(loaded.model), logitsOf(model));
  t.is(loaded.hash, hash);
  t.deepEqual(loaded.meta, { note: 'test' });
  t.deepEqual(loaded.tokenizer.toJSON(), tokenizer.toJSON());
  const policy = await loadCheckpointPolicy(out);
  t.is(policy.version, hash);
  t.is(policy.id, `ckpt:${out}`);
  const other = new GPTModel(config, 12);
  t.not(await modelHash(other, tokenizer), hash);
  for (const m of [model, loaded.model, other]) m.dispose();
});

test('overwriting is atomic: no temporary directories are left, the new weights replace the old', async (t) => {
  const out = join(dir, 'b');
  const first = new GPTModel(config, 1);
  const second = new GPTModel(config, 2);
  await saveCheckpoint(out, first, tokenizer);
  const hash2 = await saveCheckpoint(out, second, tokenizer);
  t.is((await loadCheckpoint(out)).hash, hash2);
  t.deepEqual(
    (await readdir(dir)).filter((n) => n.includes('.tmp-')),
    [],
  );
  first.dispose();
  second.dispose();
});

test('corrupt, missing or mismatched checkpoints are clear errors', async (t) => {
  const out = join(dir, 'c');
  const model = new GPTModel(config, 3);
  await saveCheckpoint(out, model, tokenizer);
  await t.throwsAsync(loadCheckpoint(join(dir, 'missing')), { instanceOf: CheckpointError, message: /cannot read/ });
  const weights = await readFile(join(out, 'weights.bin'));
  weights[10] = weights[10]! ^ 0xff;
  await writeFile(join(out, 'weights.bin'), weights);
  await t.throwsAsync(loadCheckpoint(out), { instanceOf: CheckpointError, message: /hash mismatch/ });
  await writeFile(join(out, 'model.json'), '{"format": "something-else"}');
  await t.throwsAsync(loadCheckpoint(out), { instanceOf: CheckpointError, message: /not an agent-r1-gpt/ });
  await writeFile(join(out, 'model.json'), 'not json');
  await t.throwsAsync(loadCheckpoint(out), { instanceOf: CheckpointError, message: /not JSON/ });
  const small = new GPTModel({ ...config, vocabSize: 300 }, 3);
  await t.throwsAsync(saveCheckpoint(join(dir, 'd'), small, tokenizer), {
    instanceOf: CheckpointError,
    message: /vocabulary/,
  });
  model.dispose();
  small.dispose();
});
