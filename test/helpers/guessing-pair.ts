import { join } from 'node:path';
import guessingScenario from '../../scenarios/guessing/index.ts';
import { deriveSeed } from '../../src/core/rng.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { userWarmStart, warmStartOnRecords } from '../../src/rl/warm-start.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { tmp } from '../rl/toy.ts';

// The guessing game's two roles as tiny GPTs, for the co-training tests (the slow suite).

export const game = (guessingScenario as unknown as (o: { [k: string]: string }) => Scenario)({});
// The tiny models below never win a round, so the game's reward would be 0 for every sample (no
// advantage, no update): the user is rewarded here for a short first clue, which varies.
export const shortClue = (record: EpisodeRecord) =>
  -(record.turns.find((turn) => turn.reply)?.reply?.steps[0]?.text.length ?? 0) / 50;
export const scenario: Scenario = { ...game, user: { ...game.user!, reward: (_outcome, record) => shortClue(record) } };
export const config = resolveConfig({
  algo: 'grpo',
  seed: 3,
  steps: 2,
  tasksPerStep: 2,
  group: 4,
  minibatch: 8,
  lr: 1e-2,
  klMode: 'none',
  klCoef: 0,
  evalEvery: 1,
  evalEpisodes: 4,
  checkpointEvery: 1,
});

/** A tiny guesser and a tiny describer, warm-started on a few noisy demonstrations; saved once. */
const warm = (async () => {
  await initBackend('wasm');
  const { records, summary } = await rollout({
    scenario: game,
    policy: await referencePolicy(game, 'expert', 1),
    userPolicy: await game.user!.policies['noisy']!({ scenario: game, seed: 1 }),
    split: 'train',
    episodes: 64,
    seed: deriveSeed(1, 'demos'),
  });
  const training = {
    seed: 1,
    steps: 60,
    lr: 1e-2,
    vocabSize: 300,
    model: { dModel: 32, nLayers: 1, nHeads: 2, contextLength: 256, copyHead: true },
  };
  const agent = await warmStartOnRecords(records, { id: 'expert', summary }, training);
  const user = await userWarmStart(records, { id: 'noisy', summary }, training);
  const dir = await tmp();
  await agent.trainable.save(join(dir, 'agent'));
  await user.trainable.save(join(dir, 'user'));
  return dir;
})();

export const load = async (name: string) => GptTrainable.fromCheckpoint(join(await warm, name), { id: `t-${name}` });
