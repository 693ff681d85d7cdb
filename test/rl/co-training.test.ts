import test from 'ava';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { config, load, scenario, shortClue } from '../helpers/guessing-pair.ts';
import { BigramPolicy, readJsonl, tmp, toyConfig, toyScenario } from './toy.ts';

// Two roles trained in one run (train --roles agent,user): the user alone against a fixed agent,
// and the runs that cannot train a role (both roles learning side by side, and resuming exactly:
// co-training.slow.test.ts).

test('the user alone learns against a fixed agent; runs that cannot train a role are refused', async (t) => {
  const [model, user] = [await load('agent'), await load('user')];
  const [agent0, user0] = [model.version(), user.version()];
  await train({ scenario, model, user, trainAgent: false, config: { ...config, steps: 1 }, outDir: await tmp() });
  t.is(model.version(), agent0);
  t.not(user.version(), user0);
  await t.throwsAsync(
    train({ scenario: toyScenario(), model: new BigramPolicy(), user, config: toyConfig(), outDir: await tmp() }),
    { instanceOf: TrainingError, message: /needs a scenario with a user/ },
  );
  await t.throwsAsync(train({ scenario, model, trainAgent: false, config, outDir: await tmp() }), {
    instanceOf: TrainingError,
    message: /nothing to train/,
  });
});
