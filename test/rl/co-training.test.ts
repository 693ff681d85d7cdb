import test from 'ava';
import { TrainingError } from '../../src/rl/errors.ts';
import { train } from '../../src/rl/trainer.ts';
import { BigramPolicy, tmp, toyConfig, toyScenario } from './toy.ts';

// Two roles trained in one run (train --roles agent,user): the runs that cannot train a role are
// refused before anything runs. The user alone learning against a fixed agent, both roles learning
// side by side, and resuming exactly: co-training.slow.test.ts.

test('runs that cannot train a role are refused: a user model for a scenario without a user, and neither role trained', async (t) => {
  await t.throwsAsync(
    train({
      scenario: toyScenario(),
      model: new BigramPolicy(),
      user: new BigramPolicy(),
      config: toyConfig(),
      outDir: await tmp(),
    }),
    { instanceOf: TrainingError, message: /needs a scenario with a user/ },
  );
  await t.throwsAsync(
    train({
      scenario: toyScenario(),
      model: new BigramPolicy(),
      trainAgent: false,
      config: toyConfig(),
      outDir: await tmp(),
    }),
    { instanceOf: TrainingError, message: /nothing to train/ },
  );
});
