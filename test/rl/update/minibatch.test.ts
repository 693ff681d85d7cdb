import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { AdamW } from '../../../src/policy/tfjs/adamw.ts';
import { computeAdvantages } from '../../../src/rl/advantages.ts';
import { resolveConfig } from '../../../src/rl/config.ts';
import { minibatchStep, type UpdateBatch } from '../../../src/rl/update/minibatch.ts';
import { BigramPolicy } from '../toy.ts';
import { batch } from './fixtures.ts';

const updateBatch = (): UpdateBatch => ({
  seqs: batch,
  scores: { old: null, refLogprobs: null },
  advantages: computeAdvantages(
    'grpo',
    batch.map((s) => ({ rewards: s.rewards, mask: s.mask, group: s.group })),
    {},
  ),
});

// serial: the test counts tensors, which a test running beside it would make
test.serial('a minibatch step moves the weights and reports its loss and grad norm', async (t) => {
  const model = new BigramPolicy();
  const before = Array.from(model.logits.dataSync());
  const config = resolveConfig({ algo: 'grpo', minibatch: 4, microbatch: 2, lr: 0.1, klMode: 'none', klCoef: 0 });
  const opt = new AdamW(model.variables, { lr: 0.1 });
  const tensors = tf.memory().numTensors;
  const s = await minibatchStep(model, opt, config, updateBatch(), [0, 1, 2, 3]);
  t.true(s.stepped);
  t.true(s.gradNorm > 0);
  t.is(s.vf, undefined);
  t.is(s.kl, undefined);
  t.true(Math.abs(s.ent - Math.log(12)) < 1e-5, 'a uniform start');
  t.notDeepEqual(Array.from(model.logits.dataSync()), before);
  t.is(tf.memory().numTensors, tensors, 'no tensor left behind');
  model.dispose();
});

test.serial('a non-finite gradient skips the step, weights untouched', async (t) => {
  const model = new BigramPolicy(tf.variable(tf.fill([12, 12], NaN)));
  const config = resolveConfig({ algo: 'grpo', minibatch: 4, lr: 0.1, klMode: 'none', klCoef: 0 });
  const s = await minibatchStep(model, new AdamW(model.variables, { lr: 0.1 }), config, updateBatch(), [0, 1, 2, 3]);
  t.false(s.stepped);
  t.false(Number.isFinite(s.gradNorm));
  t.true(Array.from(model.value.dataSync()).every((x) => x === 0));
  model.dispose();
});
