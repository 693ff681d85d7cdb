import test from 'ava';
import { readFile, readdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { resolveConfig } from '../../src/rl/config.ts';
import { train, type StepMetrics } from '../../src/rl/trainer.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { BigramPolicy, readJsonl, tmp, toyConfig, toyScenario, withoutTime } from './toy.ts';

test('a seeded GRPO run on the toy scenario raises the mean reward', async (t) => {
  const out = await tmp();
  const model = new BigramPolicy();
  const result = await train({ scenario: toyScenario(), model, config: toyConfig(), outDir: out });
  const rewards = result.steps.map((s) => s.reward);
  t.log('reward per step', rewards.map((r) => r.toFixed(2)).join(' '));
  t.log('dev success at eval steps', result.evals.map((e) => `${e.step}:${e.success.toFixed(2)}`).join(' '));
  const first = (rewards[0]! + rewards[1]!) / 2;
  const last = (rewards.at(-1)! + rewards.at(-2)!) / 2;
  t.true(last > first + 0.4, `reward ${first} → ${last}`);
  t.true(result.evals.at(-1)!.success > result.evals[0]!.success);
  // every step's records carry the policy version that produced them, and it changes with each update
  const records = await readJsonl(join(out, 'episodes.jsonl'));
  t.is(records.length, 10 * 32);
  const versions = result.steps.map((s) => s.policyVersion);
  t.is(new Set(versions).size, versions.length);
  records.forEach((r, i) => t.is(r.policy.version, versions[Math.floor(i / 32)]));
  // metrics file: one eval at 0, 5, 10 and one line per step
  const metrics = await readJsonl(join(out, 'metrics.jsonl'));
  t.deepEqual(
    metrics.filter((m) => m.kind === 'eval').map((m) => m.step),
    [0, 5, 10],
  );
  t.deepEqual(
    metrics.filter((m) => m.kind === 'step').map((m) => m.step),
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
  );
  const m: StepMetrics = metrics.find((x) => x.kind === 'step');
  for (const k of ['reward', 'success', 'kl', 'entropy', 'clipFraction', 'gradNorm', 'policyLoss'] as const)
    t.is(typeof m[k], 'number', k);
  t.is(typeof m.time.tokensPerS, 'number');
  t.true(existsSync(join(out, 'final', 'toy.json')));
  t.deepEqual(JSON.parse(await readFile(join(out, 'latest.json'), 'utf8')), {
    step: 10,
    dir: join('checkpoints', 'step-000010'),
  });
  t.deepEqual((await readdir(join(out, 'checkpoints'))).sort(), ['step-000005', 'step-000010']);
  // best/: the policy of the best dev eval after step 0 (ties to the later step), as at that step's checkpoint
  const trained = metrics.filter((m) => m.kind === 'eval' && m.step > 0);
  const top = Math.max(...trained.map((e) => e.outcome.em ?? e.success));
  const expected = trained.filter((e) => (e.outcome.em ?? e.success) === top).at(-1);
  const best = JSON.parse(await readFile(join(out, 'best', 'best.json'), 'utf8'));
  t.deepEqual(best, { step: expected.step, devScore: top, split: 'dev' });
  t.deepEqual(result.best, { step: expected.step, devScore: top, dir: join(out, 'best') });
  t.is(
    await readFile(join(out, 'best', 'toy.json'), 'utf8'),
    await readFile(
      join(out, 'checkpoints', `step-0000${String(expected.step).padStart(2, '0')}`, 'policy', 'toy.json'),
      'utf8',
    ),
  );
  // the same directory again without --resume is refused
  await t.throwsAsync(train({ scenario: toyScenario(), model, config: toyConfig(), outDir: out }), {
    instanceOf: TrainingError,
    message: /--resume/,
  });
});

test('a rollout batch where some episodes failed still trains on the rest', async (t) => {
  const out = await tmp();
  const result = await train({
    scenario: toyScenario({ failEvery: 2 }),
    model: new BigramPolicy(),
    config: toyConfig({ steps: 2, evalEvery: 0 }),
    outDir: out,
  });
  for (const s of result.steps) {
    t.true(s.failed > 0, 'some episodes failed');
    t.is(s.skipped, s.failed);
    t.is(s.sequences, s.episodes - s.failed);
    t.true(s.optimizerSteps > 0);
  }
});

test('bad training configs are refused with a readable error', (t) => {
  t.throws(() => resolveConfig({ algo: 'dpo' }), { instanceOf: TrainingError, message: /unknown algorithm "dpo"/ });
  t.throws(() => resolveConfig({ algo: 'grpo', lr: -1 }), { instanceOf: TrainingError, message: /lr/ });
  t.throws(() => resolveConfig({ algo: 'grpo', group: 0 }), { instanceOf: TrainingError, message: /group/ });
});

test('step-level GRPO (a window of one turn) learns the toy, trains one sample per step, and resumes exactly', async (t) => {
  const config = toyConfig({ steps: 10, evalEvery: 5, checkpointEvery: 20 });
  const episode = { context: 'window:1' };
  const a = await tmp();
  const whole = await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: a, episode });
  const records = await readJsonl(join(a, 'episodes.jsonl'));
  t.true(records.every((r) => r.config.context === 'window:1'));
  t.true(records.some((r) => r.turns.length > 1 && r.turns[1].context !== undefined));
  const rewards = whole.steps.map((s) => s.reward);
  t.true(rewards.at(-1)! > rewards[0]! + 0.4, `reward ${rewards.join(' ')}`);
  const b = await tmp();
  await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: b, episode, stopAfter: 5 });
  await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: b, episode, resume: true });
  t.deepEqual(
    withoutTime(await readJsonl(join(b, 'metrics.jsonl'))),
    withoutTime(await readJsonl(join(a, 'metrics.jsonl'))),
  );
  t.is(await readFile(join(b, 'episodes.jsonl'), 'utf8'), await readFile(join(a, 'episodes.jsonl'), 'utf8'));
  t.is(await readFile(join(b, 'final', 'toy.json'), 'utf8'), await readFile(join(a, 'final', 'toy.json'), 'utf8'));
  // a resume under another context is another run
  await t.throwsAsync(
    train({
      scenario: toyScenario(),
      model: new BigramPolicy(),
      config,
      outDir: b,
      episode: { context: 'window:2' },
      resume: true,
    }),
    { instanceOf: TrainingError, message: /another config/ },
  );
});

test('step-level PPO: the critic values each step’s state, GAE runs over steps, and the reward rises', async (t) => {
  const out = await tmp();
  const result = await train({
    scenario: toyScenario(),
    model: new BigramPolicy(),
    config: toyConfig({ algo: 'ppo', evalEvery: 0 }),
    outDir: out,
    episode: { context: 'window:1' },
  });
  const rewards = result.steps.map((s) => s.reward);
  t.true(rewards.at(-1)! > rewards[0]! + 0.3, `reward ${rewards.map((r) => r.toFixed(2)).join(' ')}`);
  t.true(result.steps.every((s) => typeof s.valueLoss === 'number' && Number.isFinite(s.valueLoss)));
});
