import test from 'ava';
import { resolveConfig } from '../../../src/rl/config.ts';
import { applyKlPenalty } from '../../../src/rl/kl.ts';
import { shapeRewards } from '../../../src/rl/update/rewards.ts';
import { batch } from './fixtures.ts';

test('token rewards: the episodes’ own, or with the KL penalty in them when the KL goes into the reward', (t) => {
  const old = batch.map((s) => s.tokens.map((_, i) => -0.5 - 0.1 * i));
  const ref = batch.map((s) => s.tokens.map(() => -0.7));
  const plain = shapeRewards(batch, old, ref, resolveConfig({ algo: 'reinforce++', klMode: 'loss', klCoef: 0.1 }));
  t.deepEqual(
    plain.rewards,
    batch.map((s) => s.rewards),
  );
  t.not(plain.rewards[0], batch[0]!.rewards, 'a copy');
  t.is(plain.kl, null);
  const config = resolveConfig({ algo: 'reinforce++', klMode: 'reward', klCoef: 0.1 });
  const shaped = shapeRewards(batch, old, ref, config);
  batch.forEach((s, i) => {
    const expected = applyKlPenalty(s.rewards, old[i]!, ref[i]!, s.mask, 0.1, config.klEstimator);
    t.deepEqual(shaped.rewards[i], expected.rewards);
    t.deepEqual(shaped.kl![i], expected.kl);
  });
  t.is(shapeRewards(batch, old, null, config).kl, null, 'no reference, no penalty');
});
