import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { aggregateLoss, clippedValueLoss, policyGradientLoss, ppoPolicyLoss } from '../../src/rl/losses.ts';
import { applyKlPenalty, klTensor, klToken } from '../../src/rl/kl.ts';
import { RlInputError } from '../../src/rl/errors.ts';

const near = (t: any, a: number, b: number, eps = 1e-5) => t.true(Math.abs(a - b) < eps, `${a} vs ${b}`);
const val = (x: tf.Tensor) => x.dataSync()[0]!;
const t2 = (rows: number[][]) => tf.tensor2d(rows);

test('PPO loss at ratio 1 equals the plain policy gradient, in value and gradient', (t) => {
  const logp = [
    [-1, -2, -0.5],
    [-0.3, -0.7, -4],
  ];
  const adv = t2([
    [1, -0.5, 2],
    [0.3, 0, -1],
  ]);
  const mask = t2([
    [0, 1, 1],
    [1, 1, 0],
  ]);
  const lp = tf.variable(t2(logp));
  const old = t2(logp);
  const ppo = ppoPolicyLoss({ logprobs: lp, oldLogprobs: old, advantages: adv, mask });
  const pg = policyGradientLoss({ logprobs: lp, advantages: adv, mask });
  // −mean(A) over the 4 action tokens
  near(t, val(ppo.loss), -(-0.5 + 2 + 0.3 + 0) / 4);
  // −A·logp has another value (the gradient is what matters); both are finite here
  t.true(Number.isFinite(val(pg)));
  t.is(val(ppo.clipFraction), 0);
  near(t, val(ppo.approxKl), 0);
  const g1 = tf.grad((x: tf.Tensor) => ppoPolicyLoss({ logprobs: x, oldLogprobs: old, advantages: adv, mask }).loss)(
    lp,
  );
  const g2 = tf.grad((x: tf.Tensor) => policyGradientLoss({ logprobs: x, advantages: adv, mask }))(lp);
  const a = g1.arraySync() as number[][];
  const b = g2.arraySync() as number[][];
  a.flat().forEach((x, i) => near(t, x, b.flat()[i]!));
  // d/dlogp of −A·logp/4 on masked tokens
  near(t, a[0]![2]!, -2 / 4);
  near(t, a[1]![2]!, 0);
});

test('PPO clips where it should: low/high clip, dual clip, zero gradient when clipped', (t) => {
  const old = t2([[0, 0, 0, 0, 0]]);
  // ratios 1.5 (A=1), 1.5 (A=1, high clip 0.28), 0.5 (A=−1), 5 (A=−1: dual clip), 0.5 (A=1: not clipped, pessimistic)
  const ratios = [1.5, 1.5, 0.5, 5, 0.5];
  const adv = [1, 1, -1, -1, 1];
  const lp = t2([ratios.map(Math.log)]);
  const one = (i: number, opts = {}) =>
    ppoPolicyLoss(
      {
        logprobs: lp,
        oldLogprobs: old,
        advantages: t2([adv]),
        mask: t2([[0, 1, 2, 3, 4].map((k) => (k === i ? 1 : 0))]),
      },
      opts,
    );
  near(t, val(one(0).loss), -1.2);
  t.is(val(one(0).clipFraction), 1);
  near(t, val(one(1, { clipHigh: 0.28 }).loss), -1.28);
  near(t, val(one(2).loss), 0.8);
  near(t, val(one(3).loss), 3);
  t.is(val(one(3).dualClipFraction), 1);
  near(t, val(one(3, { dualClip: null }).loss), 5);
  near(t, val(one(4).loss), -0.5);
  t.is(val(one(4).clipFraction), 0);
  // clipped tokens carry no gradient
  const mask = t2([[1, 0, 0, 1, 0]]);
  const g = tf.grad(
    (x: tf.Tensor) => ppoPolicyLoss({ logprobs: x, oldLogprobs: old, advantages: t2([adv]), mask }).loss,
  )(lp);
  t.deepEqual(
    Array.from(g.dataSync()).map((x) => x + 0),
    [0, 0, 0, 0, 0],
  );
});

test('loss aggregation: token-mean, seq-mean-token-sum, seq-mean-token-mean', (t) => {
  const loss = t2([
    [1, 2, 3],
    [4, 5, 6],
    [7, 8, 9],
  ]);
  const mask = t2([
    [1, 1, 0],
    [0, 0, 1],
    [0, 0, 0],
  ]);
  near(t, val(aggregateLoss(loss, mask)), (1 + 2 + 6) / 3);
  near(t, val(aggregateLoss(loss, mask, 'seq-mean-token-sum')), (3 + 6) / 2);
  near(t, val(aggregateLoss(loss, mask, 'seq-mean-token-mean')), (1.5 + 6) / 2);
  // nothing masked: 0, not NaN
  t.is(val(aggregateLoss(loss, tf.zerosLike(mask))), 0);
});

test('clipped value loss (hand-computed)', (t) => {
  const r = clippedValueLoss(
    { values: t2([[1, 0.6]]), oldValues: t2([[0.5, 0.5]]), returns: t2([[2, 0.5]]), mask: t2([[1, 1]]) },
    { clipRange: 0.2 },
  );
  // token 0: (1 − 2)² = 1 vs (0.7 − 2)² = 1.69 → 1.69 (clipped); token 1: 0.01 vs 0.01 → 0.01
  near(t, val(r.loss), (0.5 * (1.69 + 0.01)) / 2);
  near(t, val(r.clipFraction), 0.5);
});

test('KL of a policy against itself is 0; k1, k2, k3 hand-computed', (t) => {
  for (const k of ['k1', 'k2', 'k3'] as const) {
    t.is(klToken(-1.3, -1.3, k), 0);
    t.true(Array.from(klTensor(t2([[-1, -2]]), t2([[-1, -2]]), k).dataSync()).every((x) => x === 0));
  }
  near(t, klToken(-1, -2, 'k1'), 1);
  near(t, klToken(-1, -2, 'k2'), 0.5);
  near(t, klToken(-1, -2, 'k3'), Math.exp(-1) + 1 - 1);
  near(t, val(klTensor(t2([[-1]]), t2([[-2]]), 'k3')), Math.exp(-1));
  // k3 is clamped to 10
  t.is(klToken(-30, 0, 'k3'), 10);
  t.true(klToken(-0.1, -3, 'k3') >= 0 && klToken(-3, -0.1, 'k3') >= 0);
});

test('KL as a reward penalty touches action tokens only', (t) => {
  const r = applyKlPenalty([0, 0, 1], [0, -1, -1], [0, -2, -1], [0, 1, 1], 0.1, 'k1');
  t.deepEqual(r.kl, [0, 1, 0]);
  near(t, r.rewards[1]!, -0.1);
  t.is(r.rewards[2], 1);
  t.throws(() => applyKlPenalty([0], [0, 1], [0], [1], 0.1), { instanceOf: RlInputError, message: /differ in length/ });
  t.throws(() => applyKlPenalty([0], [0], [0], [1], -1), { instanceOf: RlInputError, message: /coefficient/ });
  t.throws(() => klToken(0, 0, 'k9' as any), { instanceOf: RlInputError, message: /unknown KL estimator "k9"/ });
});

test('losses reject bad shapes and options', (t) => {
  const a = t2([[1, 2]]);
  const b = t2([[1, 2, 3]]);
  t.throws(() => ppoPolicyLoss({ logprobs: a, oldLogprobs: b, advantages: a, mask: a }), {
    instanceOf: RlInputError,
    message: /shape \[1,3\]/,
  });
  t.throws(
    () =>
      ppoPolicyLoss({
        logprobs: tf.tensor1d([1]),
        oldLogprobs: tf.tensor1d([1]),
        advantages: tf.tensor1d([1]),
        mask: tf.tensor1d([1]),
      }),
    { message: /\[batch, time\]/ },
  );
  t.throws(() => ppoPolicyLoss({ logprobs: a, oldLogprobs: a, advantages: a, mask: a }, { clipLow: 1.5 }), {
    message: /clipLow/,
  });
  t.throws(() => ppoPolicyLoss({ logprobs: a, oldLogprobs: a, advantages: a, mask: a }, { dualClip: 0.5 }), {
    message: /dualClip/,
  });
  t.throws(() => aggregateLoss(a, a, 'mean' as any), { message: /unknown loss aggregation "mean"/ });
  t.throws(() => clippedValueLoss({ values: a, oldValues: a, returns: b, mask: a }), { instanceOf: RlInputError });
});
