import test from 'ava';
import { emptyMetrics, updateMetrics } from '../../../src/rl/update/metrics.ts';
import type { MinibatchStats } from '../../../src/rl/update/minibatch.ts';

const stats = (x: number, over: Partial<MinibatchStats> = {}): MinibatchStats => ({
  pg: x,
  clip: x / 10,
  dual: 0,
  akl: x / 100,
  ent: x,
  gradNorm: x,
  stepped: true,
  ...over,
});

test('update metrics: means over the steps; entropy and loss KL over the first epoch; skipped steps apart', (t) => {
  const m = updateMetrics({
    masks: [
      [0, 1, 1],
      [0, 1],
    ],
    tooLong: 1,
    usePpoValue: true,
    rewardKl: null,
    advantages: [{ advantages: [9, 1, -1] }, { advantages: [9, 2] }],
    steps: [
      { epoch: 0, stats: stats(1, { vf: 0.5, kl: 0.2 }) },
      { epoch: 0, stats: stats(3, { vf: 1.5, kl: 0.4 }) },
      { epoch: 1, stats: stats(5, { vf: 2.5, kl: 9, gradNorm: NaN, stepped: false }) },
    ],
  });
  t.deepEqual([m.sequences, m.actionTokens, m.tooLong], [2, 3, 1]);
  t.is(m.policyLoss, 3);
  t.is(m.valueLoss, 1.5);
  t.is(m.entropy, 2);
  t.true(Math.abs(m.kl! - 0.3) < 1e-12);
  t.deepEqual([m.gradNorm, m.skippedSteps, m.optimizerSteps], [2, 1, 2]);
  t.is(m.advantageMean, 2 / 3);
  t.is(m.advantageAbsMean, 4 / 3);
  // the reward-shaping KL, when there is one, is the KL reported
  const shaped = updateMetrics({
    masks: [[0, 1]],
    tooLong: 0,
    usePpoValue: false,
    rewardKl: [[5, 0.1]],
    advantages: [{ advantages: [0, 1] }],
    steps: [
      { epoch: 0, stats: stats(1) },
      { epoch: 0, stats: stats(4) },
    ],
  });
  t.deepEqual([shaped.kl, shaped.valueLoss, shaped.gradNormMax], [0.1, null, 4]);
  t.deepEqual(emptyMetrics(2), { ...emptyMetrics(0), tooLong: 2 });
});
