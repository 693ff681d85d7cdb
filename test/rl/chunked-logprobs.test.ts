import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { chosenLogprobs } from '../../src/rl/chunked-logprobs.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';

test.before(async () => {
  await initBackend('wasm');
});

function inputs(N: number, V: number, d = 8) {
  return {
    h: tf.randomNormal([N, d], 0, 1, 'float32', 1) as tf.Tensor2D,
    w: tf.randomNormal([V, d], 0, 0.5, 'float32', 2) as tf.Tensor2D,
    targets: tf.tensor1d(
      Int32Array.from({ length: N }, (_, i) => (i * 7919) % V),
      'int32',
    ),
  };
}

function worst(x: ArrayLike<number>, y: ArrayLike<number>): number {
  let w = 0;
  for (let i = 0; i < x.length; i++) w = Math.max(w, Math.abs(x[i]! - y[i]!) / Math.max(1, Math.abs(y[i]!)));
  return w;
}

// rows 0: the fused kernel (the default on the CPU backends), whose rows go in fours and columns in 16s.
for (const [V, N, rows, temperature, d] of [
  [997, 9, 4, 1, 8],
  [50, 7, 2, 0.7, 8],
  [997, 9, 0, 1, 8],
  [50, 7, 0, 0.7, 20],
  [300, 13, 0, 1.3, 64],
] as const) {
  test.serial(
    `log-probs, entropies and their gradients equal the plain computation's, ${rows ? `block by block: ${N} rows in blocks of ${rows}` : `fused: ${N} rows`}, V ${V}, width ${d}, T ${temperature}`,
    async (t) => {
      const { h, w, targets } = inputs(N, V, d);
      const gLp = tf.randomNormal([N], 0, 1, 'float32', 3);
      const gEnt = tf.randomNormal([N], 0, 1, 'float32', 4);
      // The same quantities the plain way: the whole [N, V] log-softmax, kept for the backward pass.
      const direct = (hh: tf.Tensor2D, ww: tf.Tensor2D) => {
        const logp = tf.logSoftmax(tf.matMul(hh, ww, false, true).div(temperature)) as tf.Tensor2D;
        return {
          logprobs: logp.mul(tf.oneHot(targets, V).toFloat()).sum(-1) as tf.Tensor1D,
          entropy: logp.exp().mul(logp).sum(-1).neg() as tf.Tensor1D,
        };
      };
      const blocked = (hh: tf.Tensor2D, ww: tf.Tensor2D) =>
        chosenLogprobs(hh, ww, targets, temperature, rows ? { rows } : {});
      // A loss that weighs both outputs, so both gradients flow.
      const loss = (f: typeof direct) => (hh: tf.Tensor, ww: tf.Tensor) => {
        const out = f(hh as tf.Tensor2D, ww as tf.Tensor2D);
        return out.logprobs.mul(gLp).sum().add(out.entropy.mul(gEnt).sum()) as tf.Scalar;
      };
      const a = blocked(h, w);
      const b = direct(h, w);
      t.true(worst(await a.logprobs.data(), await b.logprobs.data()) < 1e-5);
      t.true(worst(await a.entropy.data(), await b.entropy.data()) < 1e-5);
      const [gh1, gw1] = tf.grads(loss(blocked))([h, w]);
      const [gh2, gw2] = tf.grads(loss(direct))([h, w]);
      t.true(worst(await gh1!.data(), await gh2!.data()) < 1e-5, 'd/dhidden');
      t.true(worst(await gw1!.data(), await gw2!.data()) < 1e-5, 'd/dhead');
      tf.dispose([h, w, targets, gLp, gEnt, a.logprobs, a.entropy, b.logprobs, b.entropy, gh1!, gh2!, gw1!, gw2!]);
    },
  );
}

test.serial(
  'without entropies: the log-probs and their gradients as with them, repeated targets summed into the head once each',
  async (t) => {
    const [V, N] = [50, 9];
    const { h, w } = inputs(N, V);
    const targets = tf.tensor1d(
      Int32Array.from({ length: N }, (_, i) => i % 3),
      'int32',
    );
    const gLp = tf.randomNormal([N], 0, 1, 'float32', 3);
    const loss = (entropy: boolean) => (hh: tf.Tensor, ww: tf.Tensor) =>
      chosenLogprobs(hh as tf.Tensor2D, ww as tf.Tensor2D, targets, 0.8, { rows: 2, entropy })
        .logprobs.mul(gLp)
        .sum() as tf.Scalar;
    const direct = (hh: tf.Tensor, ww: tf.Tensor) =>
      (tf.logSoftmax(tf.matMul(hh, ww, false, true).div(0.8)) as tf.Tensor2D)
        .mul(tf.oneHot(targets, V).toFloat())
        .sum(-1)
        .mul(gLp)
        .sum() as tf.Scalar;
    const without = chosenLogprobs(h, w, targets, 0.8, { rows: 2, entropy: false });
    t.deepEqual(Array.from(await without.entropy.data()), new Array(N).fill(0));
    const [gh1, gw1] = tf.grads(loss(false))([h, w]);
    const [gh2, gw2] = tf.grads(direct)([h, w]);
    t.true(worst(await gh1!.data(), await gh2!.data()) < 1e-5, 'd/dhidden');
    t.true(worst(await gw1!.data(), await gw2!.data()) < 1e-5, 'd/dhead');
    tf.dispose([h, w, targets, gLp, without.logprobs, without.entropy, gh1!, gh2!, gw1!, gw2!]);
  },
);

test.serial("at Qwen3's 151,936-token vocabulary, log-probs and entropies are within 1e-5 of float64", async (t) => {
  const V = 151_936;
  const N = 40;
  const { h, w, targets } = inputs(N, V);
  const out = chosenLogprobs(h, w, targets);
  const logits = await tf.matMul(h, w, false, true).data();
  const ids = await targets.data();
  const logprobs = new Float64Array(N);
  const entropy = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    const row = logits.subarray(n * V, (n + 1) * V);
    let max = -Infinity;
    for (const x of row) max = Math.max(max, x);
    let z = 0;
    for (const x of row) z += Math.exp(x - max);
    const logZ = max + Math.log(z);
    for (const x of row) entropy[n]! -= Math.exp(x - logZ) * (x - logZ);
    logprobs[n] = row[ids[n]!]! - logZ;
  }
  t.true(worst(await out.logprobs.data(), logprobs) < 1e-5, 'log-probs');
  t.true(worst(await out.entropy.data(), entropy) < 1e-5, 'entropies');
  tf.dispose([h, w, targets, out.logprobs, out.entropy]);
});
