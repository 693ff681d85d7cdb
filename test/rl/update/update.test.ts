import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { AdamW } from '../../../src/policy/tfjs/adamw.ts';
import { resolveConfig } from '../../../src/rl/config.ts';
import { updateOnBatch } from '../../../src/rl/update/update.ts';
import { BigramPolicy, BOS, OBS, PEEK } from '../toy.ts';
import { batch, seq } from './fixtures.ts';

test('the on-policy shortcut gives the same update as recomputing old log-probs', async (t) => {
  const config = resolveConfig({ algo: 'grpo', seed: 1, minibatch: 8, lr: 0.1, klMode: 'none', klCoef: 0 });
  const run = async (recomputeOld: boolean) => {
    const init = tf.randomNormal([12, 12], 0, 0.5, 'float32', 3);
    const m = new BigramPolicy(tf.variable(init), tf.variable(tf.zeros([12, 1])));
    const opt = new AdamW(m.variables, { lr: 0.1 });
    const metrics = await updateOnBatch(m, null, opt, config, batch, 5, { recomputeOld });
    return { w: Array.from(m.logits.dataSync()), metrics };
  };
  const a = await run(false);
  const b = await run(true);
  a.w.forEach((x, i) => t.true(Math.abs(x - b.w[i]!) < 1e-6, `weight ${i}: ${x} vs ${b.w[i]}`));
  t.true(Math.abs(a.metrics.policyLoss - b.metrics.policyLoss) < 1e-6);
  t.true(Math.abs(a.metrics.entropy - b.metrics.entropy) < 1e-5);
  t.is(b.metrics.clipFraction, 0);
  t.is(a.metrics.optimizerSteps, 1);
  // winners gain probability
  t.true(a.metrics.gradNorm > 0);
});

test('sequences longer than the context are cut to it (rewards kept); without an action inside they are dropped', async (t) => {
  const config = resolveConfig({ algo: 'rloo', seed: 1, minibatch: 8, lr: 0.1, klMode: 'none', klCoef: 0 });
  const m = new BigramPolicy();
  const cut = seq([BOS, ...new Array(39).fill(PEEK)], [0, ...new Array(39).fill(1)], 1, 'b');
  const none = seq([BOS, ...new Array(39).fill(OBS[0]!), PEEK], [0, ...new Array(39).fill(0), 1], 1, 'b');
  const metrics = await updateOnBatch(m, null, new AdamW(m.variables, { lr: 0.1 }), config, [...batch, cut, none], 1);
  t.is(metrics.tooLong, 1);
  t.is(metrics.sequences, 5);
  t.is(metrics.actionTokens, 7 + 31);
});

for (const algo of ['grpo', 'ppo'] as const) {
  test(`${algo}: micro-batches accumulate to the same update as one pass over the minibatch`, async (t) => {
    const run = async (microbatch: number) => {
      const config = resolveConfig({
        algo,
        seed: 1,
        minibatch: 4,
        microbatch,
        epochs: 2,
        lr: 0.05,
        klMode: 'none',
        klCoef: 0,
      });
      const m = new BigramPolicy(
        tf.variable(tf.randomNormal([12, 12], 0, 0.5, 'float32', 9)),
        tf.variable(tf.randomNormal([12, 1], 0, 0.5, 'float32', 4)),
      );
      const metrics = await updateOnBatch(m, null, new AdamW(m.variables, { lr: 0.05 }), config, batch, 5);
      return { w: [...Array.from(m.logits.dataSync()), ...Array.from(m.value.dataSync())], metrics };
    };
    const a = await run(4);
    const b = await run(1);
    a.w.forEach((x, i) => t.true(Math.abs(x - b.w[i]!) < 1e-5, `weight ${i}: ${x} vs ${b.w[i]}`));
    for (const k of ['policyLoss', 'clipFraction', 'entropy', 'gradNorm', 'approxKl'] as const) {
      t.true(Math.abs(a.metrics[k] - b.metrics[k]) < 1e-5, `${k}: ${a.metrics[k]} vs ${b.metrics[k]}`);
    }
    if (algo === 'ppo') t.true(Math.abs(a.metrics.valueLoss! - b.metrics.valueLoss!) < 1e-5);
    t.is(a.metrics.optimizerSteps, 2);
  });
}

test('every forward pass, with or without gradients, holds at most a micro-batch of rows (memory)', async (t) => {
  const config = resolveConfig({
    algo: 'ppo',
    seed: 1,
    minibatch: 4,
    microbatch: 2,
    epochs: 2,
    lr: 0.05,
    klMode: 'none',
    klCoef: 0,
  });
  const m = new BigramPolicy();
  const rows: number[] = [];
  const score = m.score.bind(m);
  m.score = (req) => {
    rows.push(req.tokens.length);
    return score(req);
  };
  await updateOnBatch(m, null, new AdamW(m.variables, { lr: 0.05 }), config, batch, 1);
  t.true(rows.length > 0);
  t.true(
    rows.every((n) => n <= 2),
    `rows per pass: ${rows.join(',')}`,
  );
});

test('every pass of an update (old log-probs, the KL reference, the minibatches) scores at the rollout temperature', async (t) => {
  const config = resolveConfig({
    algo: 'ppo',
    seed: 1,
    minibatch: 2,
    epochs: 2,
    lr: 0.05,
    temperature: 0.7,
    klMode: 'loss',
    klCoef: 0.1,
  });
  const m = new BigramPolicy();
  const ref = new BigramPolicy();
  const seen: (number | undefined)[] = [];
  const watch = (p: BigramPolicy) => {
    const score = p.score.bind(p);
    p.score = (req) => {
      seen.push(req.temperature);
      return score(req);
    };
  };
  watch(m);
  watch(ref);
  await updateOnBatch(m, ref, new AdamW(m.variables, { lr: 0.05 }), config, batch, 1);
  t.true(seen.length >= 3, `${seen.length} passes`);
  t.deepEqual([...new Set(seen)], [0.7]);
});
