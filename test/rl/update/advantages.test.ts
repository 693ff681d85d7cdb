import test from 'ava';
import { computeAdvantages } from '../../../src/rl/advantages.ts';
import { resolveConfig } from '../../../src/rl/config.ts';
import { batchAdvantages } from '../../../src/rl/update/advantages.ts';
import { batch } from './fixtures.ts';

test('the batch’s advantages use the algorithm’s estimator; GAE reads the values on action tokens only', (t) => {
  const rewards = batch.map((s) => s.rewards);
  const grpo = batchAdvantages(batch, rewards, null, resolveConfig({ algo: 'grpo' }));
  const plain = batch.map((s, i) => ({ rewards: rewards[i]!, mask: s.mask, group: s.group }));
  t.deepEqual(grpo, computeAdvantages('grpo', plain, {}));
  const values = batch.map((s) => s.tokens.map(() => 0.25));
  const config = resolveConfig({ algo: 'ppo' });
  const masked = plain.map((s) => ({ ...s, values: s.mask.map((m) => m * 0.25) }));
  const opts = { gamma: config.gamma, lambda: config.lambda, normByStd: config.normByStd };
  t.deepEqual(batchAdvantages(batch, rewards, values, config), computeAdvantages('gae', masked, opts));
});
