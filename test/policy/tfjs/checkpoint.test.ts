import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { mkdtemp, readFile, readdir, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../../src/architectures/gpt/model.ts';
import { SPECIAL_TOKENS, Tokenizer, trainTokenizer } from '../../../src/policy/tfjs/tokenizer.ts';
import {
  CheckpointError,
  contentHash,
  loadCheckpoint,
  modelHash,
  saveCheckpoint,
} from '../../../src/policy/tfjs/checkpoint.ts';
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

/**
 * A checkpoint is untrusted input whose content hash anyone can recompute: each of these has a valid
 * hash and asks for something absurd. All are refused by reading model.json and stat-ing weights.bin,
 * before a tensor, a position table or the tokenizer's vocabulary is allocated.
 */
test('absurd checkpoints with valid hashes are refused before anything is allocated', async (t) => {
  const out = join(dir, 'absurd');
  const model = new GPTModel(config, 4);
  await saveCheckpoint(out, model, tokenizer);
  model.dispose();
  const original = JSON.parse(await readFile(join(out, 'model.json'), 'utf8'));
  const weights = await readFile(join(out, 'weights.bin'));
  const write = async (json: any, bin: Uint8Array = weights) => {
    json.hash = contentHash(json.modelConfig, json.tokenizer, bin);
    await writeFile(join(out, 'model.json'), JSON.stringify(json));
    await writeFile(join(out, 'weights.bin'), bin);
  };
  const variant = (change: (json: any) => void) => {
    const json = structuredClone(original);
    change(json);
    return json;
  };
  const before = process.memoryUsage();
  const cases: Array<[string, any, RegExp, Uint8Array?]> = [
    ['a context of 2^23', variant((j) => (j.modelConfig.contextLength = 2 ** 23)), /contextLength/],
    ['a context of 2^30', variant((j) => (j.modelConfig.contextLength = 2 ** 30)), /contextLength/],
    ['a width of 2^20', variant((j) => (j.modelConfig.dModel = 2 ** 20)), /dModel/],
    ['a vocabulary of 2^40', variant((j) => (j.modelConfig.vocabSize = 2 ** 40)), /vocabSize/],
    [
      'sizes in bounds whose product is not',
      variant((j) => Object.assign(j.modelConfig, { dModel: 8192, nHeads: 8, nLayers: 256, dMlp: 65536 })),
      /float32 values .* GiB/,
    ],
    ['more layers than weights', variant((j) => (j.modelConfig.nLayers = 2)), /weight specs; the config has/],
    [
      'a spec that is not the config',
      variant((j) => (j.weightSpecs[0].shape = [1, 1])),
      /weight spec 0 .* needs tok_emb float32/,
    ],
    [
      'a truncated weights file',
      structuredClone(original),
      /weights.bin is \d+ bytes; the config's weights take/,
      weights.subarray(0, 64),
    ],
    [
      'a future checkpoint version',
      variant((j) => (j.version = 2)),
      /not an agent-r1-gpt v1 checkpoint \(found version 2\)/,
    ],
  ];
  for (const [what, json, message, bin] of cases) {
    await write(json, bin);
    await t.throwsAsync(loadCheckpoint(out), { instanceOf: CheckpointError, message }, what);
  }
  // A vocabulary whose merges each join the last token with itself: 2^20 bytes by merge 20.
  const base = SPECIAL_TOKENS.length + 256;
  const chain = (double: boolean) =>
    Array.from({ length: 24 }, (_, i): [number, number] =>
      i === 0 ? [base - 256 + 97, base - 256 + 97] : [base + i - 1, double ? base + i - 1 : base - 256 + 97],
    );
  const bombOut = join(dir, 'bomb');
  const grown = new Tokenizer({ kind: 'byte-bpe', version: 1, specials: [...SPECIAL_TOKENS], merges: chain(false) });
  const wide = new GPTModel({ ...config, vocabSize: grown.vocabSize }, 5);
  await saveCheckpoint(bombOut, wide, grown);
  wide.dispose();
  const bomb = JSON.parse(await readFile(join(bombOut, 'model.json'), 'utf8'));
  bomb.tokenizer.merges = chain(true);
  bomb.hash = contentHash(bomb.modelConfig, bomb.tokenizer, await readFile(join(bombOut, 'weights.bin')));
  await writeFile(join(bombOut, 'model.json'), JSON.stringify(bomb));
  await t.throwsAsync(loadCheckpoint(bombOut), { message: /merge 16 makes the vocabulary too large/ });
  // Memory stayed bounded: the 2^23 context alone would have allocated 4 GB of position tables.
  const used = process.memoryUsage().arrayBuffers - before.arrayBuffers;
  t.true(used < 64 * 2 ** 20, `array buffers grew by ${used} bytes`);
  await write(structuredClone(original));
  (await loadCheckpoint(out)).model.dispose();
});
