import test from 'ava';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { train } from '../../src/rl/trainer.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { BigramPolicy, readJsonl, tmp, toyConfig, toyScenario, withoutTime } from './toy.ts';

// Slower checks of this feature (npm run test:slow); the rest are in trainer.test.ts.

test('resume mends a best/ that does not match the kept evals: from the kept checkpoint, or claims none', async (t) => {
  // the same seeded run: dev peaks at step 2 and falls after it
  const config = toyConfig({ algo: 'ppo', steps: 4, lr: 1, evalEvery: 1, evalEpisodes: 16, checkpointEvery: 1 });
  const a = await tmp();
  await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: a, stopAfter: 3 });
  const record = await readFile(join(a, 'best', 'best.json'), 'utf8');
  const weights = await readFile(join(a, 'best', 'toy.json'), 'utf8');
  // as if a crash came after a later step's best/ was written but before its checkpoint
  await writeFile(join(a, 'best', 'best.json'), JSON.stringify({ step: 4, devScore: 1, split: 'dev' }));
  await writeFile(join(a, 'best', 'toy.json'), '{}');
  const resumed = await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: a, resume: true });
  t.is(resumed.best?.step, 2);
  t.is(await readFile(join(a, 'best', 'best.json'), 'utf8'), record);
  t.is(await readFile(join(a, 'best', 'toy.json'), 'utf8'), weights, 'copied from checkpoints/step-000002');

  // a run from before best/ existed, whose best step has no checkpoint left: no best is claimed,
  // and a later, worse eval does not become one
  const b = await tmp();
  await train({
    scenario: toyScenario(),
    model: new BigramPolicy(),
    config: { ...config, checkpointEvery: 10 },
    outDir: b,
    stopAfter: 3,
  });
  await rm(join(b, 'best'), { recursive: true });
  const old = await train({
    scenario: toyScenario(),
    model: new BigramPolicy(),
    config: { ...config, checkpointEvery: 10 },
    outDir: b,
    resume: true,
  });
  t.is(old.best, null);
  t.false(existsSync(join(b, 'best')));
});

test('the best dev checkpoint survives a resume: a worse eval after it does not replace it', async (t) => {
  // seeded so that dev success peaks at step 2 and falls after it (0.313 at 2, 0.188 at 3 and 4)
  const config = toyConfig({ algo: 'ppo', steps: 4, lr: 1, evalEvery: 1, evalEpisodes: 16, checkpointEvery: 10 });
  const a = await tmp();
  const whole = await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: a });
  t.is(whole.best?.step, 2);
  t.true(whole.evals.at(-1)!.success < whole.best!.devScore);
  t.not(await readFile(join(a, 'best', 'toy.json'), 'utf8'), await readFile(join(a, 'final', 'toy.json'), 'utf8'));
  const b = await tmp();
  await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: b, stopAfter: 3 });
  const resumed = await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: b, resume: true });
  t.deepEqual(resumed.best, { ...whole.best!, dir: join(b, 'best') });
  t.is(await readFile(join(b, 'best', 'best.json'), 'utf8'), await readFile(join(a, 'best', 'best.json'), 'utf8'));
  t.is(await readFile(join(b, 'best', 'toy.json'), 'utf8'), await readFile(join(a, 'best', 'toy.json'), 'utf8'));
});

test('resume after 2 steps gives the same metrics at step 4 as an uninterrupted run', async (t) => {
  const config = toyConfig({ steps: 4, evalEvery: 2, checkpointEvery: 10 });
  const a = await tmp();
  await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: a });
  const b = await tmp();
  const first = await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: b, stopAfter: 2 });
  t.is(first.lastStep, 2);
  // a fresh model object (as after a crash): everything comes from the checkpoint
  const resumed = await train({ scenario: toyScenario(), model: new BigramPolicy(), config, outDir: b, resume: true });
  t.deepEqual(
    resumed.steps.map((s) => s.step),
    [3, 4],
  );
  const ma = withoutTime(await readJsonl(join(a, 'metrics.jsonl')));
  const mb = withoutTime(await readJsonl(join(b, 'metrics.jsonl')));
  t.deepEqual(mb, ma);
  t.is(await readFile(join(b, 'episodes.jsonl'), 'utf8'), await readFile(join(a, 'episodes.jsonl'), 'utf8'));
  // the best dev checkpoint is the same one, with the same weights
  t.is(await readFile(join(b, 'best', 'best.json'), 'utf8'), await readFile(join(a, 'best', 'best.json'), 'utf8'));
  t.is(await readFile(join(b, 'best', 'toy.json'), 'utf8'), await readFile(join(a, 'best', 'toy.json'), 'utf8'));
  // resuming from another initial policy (e.g. the latest checkpoint instead of the warm start) is refused
  const other = new BigramPolicy();
  await other.load(join(b, 'final'));
  await t.throwsAsync(train({ scenario: toyScenario(), model: other, config, outDir: b, resume: true }), {
    instanceOf: TrainingError,
    message: /another config/,
  });
  // resuming with another config is refused
  await t.throwsAsync(
    train({
      scenario: toyScenario(),
      model: new BigramPolicy(),
      config: { ...config, lr: 0.1 },
      outDir: b,
      resume: true,
    }),
    { instanceOf: TrainingError, message: /another config/ },
  );
});

for (const algo of ['ppo', 'reinforce++', 'rloo'] as const) {
  test(`${algo} trains on the toy scenario`, async (t) => {
    const result = await train({
      scenario: toyScenario(),
      model: new BigramPolicy(),
      config: toyConfig({ algo, steps: 14, evalEvery: 0, lr: algo === 'rloo' ? 1 : 0.3 }),
      outDir: await tmp(),
    });
    const r = result.steps.map((s) => s.reward);
    t.log(algo, r.map((x) => x.toFixed(2)).join(' '));
    const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    t.true(avg(r.slice(-4)) > avg(r.slice(0, 2)) + 0.1);
    if (algo === 'ppo') t.is(typeof result.steps[0]!.valueLoss, 'number');
  });
}
