import test from 'ava';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { config, load, scenario, shortClue } from '../helpers/guessing-pair.ts';
import { readJsonl, tmp } from './toy.ts';

// (slow suite) Two roles trained in one run: the user alone learns against a fixed agent; both roles
// learn side by side; a co-trained run stopped after one step and resumed ends with the weights of
// both roles and the records of a run that was not stopped. The refusals: co-training.test.ts.

test('the user alone learns against a fixed agent', async (t) => {
  const [model, user] = [await load('agent'), await load('user')];
  const [agent0, user0] = [model.version(), user.version()];
  await train({ scenario, model, user, trainAgent: false, config: { ...config, steps: 1 }, outDir: await tmp() });
  t.is(model.version(), agent0);
  t.not(user.version(), user0);
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
