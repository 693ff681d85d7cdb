import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCheckpoint } from '../../src/policy/tfjs/checkpoint.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { AdamW } from '../../src/policy/tfjs/adamw.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { updateOnBatch } from '../../src/rl/update/update.ts';
import type { TrainingSequence } from '../../src/policy/trajectory.ts';

const tokenizer = trainTokenizer(
  ['search the answer', '<tool_call>{"name": "search"}</tool_call>', '<answer>yes</answer>'],
  { vocabSize: 300 },
);
const tiny = (seed: number) =>
  GptTrainable.create(
    new GPTModel(
      { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 32, dMlp: 32 },
      seed,
    ),
    tokenizer,
  );

test('the GPT adapter: version = checkpoint hash; save → load restores the weights and the version', async (t) => {
  const a = await tiny(1);
  const b = await tiny(2);
  t.not(a.version(), b.version());
  const dir = join(await mkdtemp(join(tmpdir(), 'gpt-trainable-')), 'ckpt');
  await a.save(dir);
  t.is((await loadCheckpoint(dir)).hash, a.version());
  await b.load(dir);
  t.is(b.version(), a.version());
  t.is(b.policy({ temperature: 1 }).version, a.version());
  const rows = [tokenizer.encode('search the answer'), tokenizer.encode('yes')];
  const sa = a.score({ tokens: rows, length: 16, entropy: true });
  const sb = b.score({ tokens: rows, length: 16, entropy: true });
  t.deepEqual(sa.logprobs.shape, [2, 16]);
  t.is(sa.values, undefined);
  t.deepEqual(Array.from(sa.logprobs.dataSync()), Array.from(sb.logprobs.dataSync()));
  tf.dispose([sa.logprobs, sa.entropy!, sb.logprobs, sb.entropy!]);
});

test('an RL update on the GPT changes the weights, the version, and raises the rewarded sequence’s log-prob', async (t) => {
  const m = await tiny(3);
  const v0 = m.version();
  const good = tokenizer.encode('<answer>yes</answer>');
  const bad = tokenizer.encode('<answer>no</answer>');
  const seq = (tokens: number[], reward: number): TrainingSequence => {
    const toks = [tokenizer.special('<|assistant|>'), ...tokens];
    const mask = toks.map((_, i) => (i === 0 ? 0 : 1));
    const rewards = toks.map((_, i) => (i === toks.length - 1 ? reward : 0));
    return {
      episodeId: String(reward),
      group: 'g',
      sample: 0,
      tokens: toks,
      mask,
      rewards,
      sampleLogprobs: toks.map(() => 0),
      promptLength: 1,
      totalReward: reward,
      success: reward > 0,
      metrics: {},
      policyVersion: v0,
    };
  };
  const batch = [seq(good, 1), seq(bad, 0)];
  const logp = () => {
    const s = m.score({ tokens: [batch[0]!.tokens], length: 16 });
    const x = (s.logprobs.arraySync() as number[][])[0]!.reduce((a, b) => a + b, 0);
    s.logprobs.dispose();
    return x;
  };
  const before = logp();
  const config = resolveConfig({ algo: 'grpo', seed: 1, minibatch: 8, lr: 1e-2, klMode: 'none', klCoef: 0 });
  const opt = new AdamW(m.variables, { lr: 1e-2 });
  for (let i = 0; i < 3; i++) await updateOnBatch(m, null, opt, config, batch, i);
  t.not(m.version(), v0);
  t.true(logp() > before, `${before} → ${logp()}`);
});

test('scoring with a mask computes the masked positions only: equal to the full pass there, 0 elsewhere, differentiable', async (t) => {
  const m = await GptTrainable.create(
    new GPTModel(
      {
        vocabSize: tokenizer.vocabSize,
        dModel: 16,
        nLayers: 1,
        nHeads: 2,
        contextLength: 32,
        dMlp: 32,
        copyHead: true,
      },
      5,
    ),
    tokenizer,
  );
  const rows = [tokenizer.encode('search the answer yes'), tokenizer.encode('<answer>yes</answer>')];
  const mask = rows.map((r) => r.map((_, i) => (i >= 2 ? 1 : 0)));
  const full = m.score({ tokens: rows, length: 16, values: true, entropy: true });
  const part = m.score({ tokens: rows, length: 16, values: true, entropy: true, mask });
  for (const key of ['logprobs', 'values', 'entropy'] as const) {
    const a = full[key]!.arraySync();
    const b = part[key]!.arraySync();
    rows.forEach((r, i) =>
      a[i]!.forEach((x, j) => {
        if (j < r.length && mask[i]![j]) t.true(Math.abs(x - b[i]![j]!) < 1e-5, `${key}[${i}][${j}]`);
        else t.is(b[i]![j], 0, `${key}[${i}][${j}] outside the mask`);
      }),
    );
  }
  const { grads } = tf.variableGrads(() => m.score({ tokens: rows, length: 16, mask }).logprobs.sum() as tf.Scalar);
  t.true(Object.values(grads).some((g) => g.abs().sum().dataSync()[0]! > 0));
  // An all-zero mask scores nothing.
  const none = m.score({ tokens: rows, length: 16, mask: rows.map((r) => r.map(() => 0)) });
  t.deepEqual(none.logprobs.shape, [2, 16]);
  t.is(none.logprobs.abs().sum().dataSync()[0], 0);
  tf.dispose([
    full.logprobs,
    full.values!,
    full.entropy!,
    part.logprobs,
    part.values!,
    part.entropy!,
    none.logprobs,
    ...Object.values(grads),
  ]);
});

test('scoring at a temperature scores the tempered distribution (logits / T), masked or not', async (t) => {
  const m = await tiny(6);
  const rows = [tokenizer.encode('search the answer yes')];
  const mask = rows.map((r) => r.map((_, i) => (i >= 1 ? 1 : 0)));
  const expected = tf.tidy(() => {
    const { logits } = m.model.forward(tf.tensor2d([rows[0]!], [1, rows[0]!.length], 'int32'));
    const lp = tf.logSoftmax(logits.div(2)).arraySync() as number[][][];
    // the log-prob of token j+1 given the prefix up to j sits at position j+1
    return rows[0]!.map((tok, j) => (j === 0 ? 0 : lp[0]![j - 1]![tok]!));
  });
  const hot = m.score({ tokens: rows, length: 16, temperature: 2 });
  const hotMasked = m.score({ tokens: rows, length: 16, temperature: 2, mask });
  const plain = m.score({ tokens: rows, length: 16 });
  const [a] = hot.logprobs.arraySync();
  const [b] = hotMasked.logprobs.arraySync();
  const [c] = plain.logprobs.arraySync();
  expected.forEach((x, j) => {
    if (j === 0) return;
    t.true(Math.abs(a![j]! - x) < 1e-4, `position ${j}: ${a![j]} vs ${x}`);
    t.true(Math.abs(b![j]! - x) < 1e-4, `masked position ${j}: ${b![j]} vs ${x}`);
  });
  t.true(
    expected.some((x, j) => j > 0 && Math.abs(c![j]! - x) > 1e-3),
    'temperature 1 is another distribution',
  );
  tf.dispose([hot.logprobs, hotMasked.logprobs, plain.logprobs]);
});
