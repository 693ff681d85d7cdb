import test from 'ava';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import guessingScenario from '../../scenarios/guessing/index.ts';
import { deriveSeed } from '../../src/core/rng.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { userWarmStart, warmStartOnRecords } from '../../src/rl/warm-start.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { BigramPolicy, readJsonl, tmp, toyConfig, toyScenario } from './toy.ts';

// Two roles trained in one run (train --roles agent,user): each its own weights, optimizer and
// samples, saved side by side, resumed exactly.

const game = (guessingScenario as unknown as (o: { [k: string]: string }) => Scenario)({});
// The tiny models below never win a round, so the game's reward would be 0 for every sample (no
// advantage, no update): the user is rewarded here for a short first clue, which varies.
const shortClue = (record: EpisodeRecord) =>
  -(record.turns.find((turn) => turn.reply)?.reply?.steps[0]?.text.length ?? 0) / 50;
const scenario: Scenario = { ...game, user: { ...game.user!, reward: (_outcome, record) => shortClue(record) } };
const config = resolveConfig({
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

const load = async (name: string) => GptTrainable.fromCheckpoint(join(await warm, name), { id: `t-${name}` });

test('co-training: both roles learn, each saved beside the other, the user recorded as it was at each step', async (t) => {
  const [model, user] = [await load('agent'), await load('user')];
  const [agent0, user0] = [model.version(), user.version()];
  const out = await tmp();
  const result = await train({ scenario, model, user, config, outDir: out });
  t.not(model.version(), agent0);
  t.not(user.version(), user0);
  const records: EpisodeRecord[] = await readJsonl(join(out, 'episodes.jsonl'));
  for (const [i, step] of result.steps.entries()) {
    t.true(step.user!.episodes > 0);
    // the user's reward is the scenario's for it (UserRole.reward), not the agent's
    const batch = records.slice(8 * i, 8 * i + 8).filter((r) => r.turns.some((turn) => turn.reply));
    t.true(Math.abs(step.user!.reward - batch.reduce((a, r) => a + shortClue(r), 0) / batch.length) < 1e-12);
    t.true(step.user!.sequences > 0 && step.user!.optimizerSteps > 0);
  }
  // each step's records name the user's version that played them; its ids and log-probs are recorded
  t.is(records[0]!.roles!.user!.policy.version, user0);
  t.not(records.at(-1)!.roles!.user!.policy.version, user0);
  const step = records[0]!.turns.find((turn) => turn.reply)!.reply!.steps[0]!;
  t.is(step.tokens!.length, step.logprobs!.length);
  // wherever the agent's policy is saved, the user's is in its user/ folder
  for (const dir of ['final', 'best', join('checkpoints', 'step-000002', 'policy')])
    t.true(existsSync(join(out, dir, 'user', 'weights.bin')), dir);
  t.true(existsSync(join(out, 'checkpoints', 'step-000002', 'user-optimizer', 'adamw.bin')));
  const saved = await GptTrainable.fromCheckpoint(join(out, 'final', 'user'), { id: 'saved-user' });
  t.is(saved.version(), user.version());
  const row = (await readJsonl(join(out, 'metrics.jsonl'))).find((m) => m.kind === 'step');
  t.is(typeof row.user.entropy, 'number');
  const config0 = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'));
  t.deepEqual(config0.roles, { agent: true, user: user0 });
});

test('a co-trained run stopped and resumed ends with the weights and records of one that was not', async (t) => {
  const whole = await tmp();
  const [a, u] = [await load('agent'), await load('user')];
  await train({ scenario, model: a, user: u, config, outDir: whole });
  const parts = await tmp();
  const [a1, u1] = [await load('agent'), await load('user')];
  await train({ scenario, model: a1, user: u1, config, outDir: parts, stopAfter: 1 });
  const [a2, u2] = [await load('agent'), await load('user')];
  await train({ scenario, model: a2, user: u2, config, outDir: parts, resume: true });
  t.is(a2.version(), a.version());
  t.is(u2.version(), u.version());
  t.deepEqual(await readFile(join(parts, 'episodes.jsonl')), await readFile(join(whole, 'episodes.jsonl')));
});

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
