import test from 'ava';
import { resolveConfig } from '../../../src/rl/config.ts';
import { padLength, padRows, scoreBatch } from '../../../src/rl/update/score.ts';
import { BigramPolicy } from '../toy.ts';
import { batch } from './fixtures.ts';

test('rows pad to a multiple of 16 within the context, with zeros', (t) => {
  t.is(padLength([[1, 2, 3]], 64), 16);
  t.is(padLength([new Array(17).fill(1)], 64), 32);
  t.is(padLength([new Array(40).fill(1)], 32), 32);
  t.deepEqual(padRows([[1, 2], [3]], 3), [
    [1, 2, 0],
    [3, 0, 0],
  ]);
});

test('scoreBatch: one on-policy step skips the old log-probs; PPO, more epochs or a KL term score them', async (t) => {
  const model = new BigramPolicy();
  const ref = await model.freeze();
  const config = (over: object) =>
    resolveConfig({ algo: 'grpo', seed: 1, minibatch: 8, klMode: 'none', klCoef: 0, ...over });
  const scores = (over: object, r: typeof ref | null = null) => scoreBatch(model, r, config(over), batch);
  t.is((await scores({})).old, null);
  t.is((await scores({})).refLogprobs, null);
  t.truthy((await scoreBatch(model, null, config({}), batch, { recomputeOld: true })).old);
  const ppo = await scores({ algo: 'ppo' });
  t.deepEqual(
    ppo.old!.logprobs.map((r) => r.length),
    batch.map((s) => s.tokens.length),
  );
  t.deepEqual(
    ppo.old!.values!.map((r) => r.length),
    batch.map((s) => s.tokens.length),
  );
  t.is((await scores({ algo: 'grpo', epochs: 2 })).old!.values, null);
  const kl = await scores({ algo: 'grpo', klMode: 'reward', klCoef: 0.1 }, ref);
  t.truthy(kl.old);
  t.deepEqual(kl.refLogprobs, kl.old!.logprobs, 'the reference is the frozen start: the same log-probs');
  ref.dispose();
  model.dispose();
});
