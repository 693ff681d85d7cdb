import test from 'ava';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { train } from '../../src/rl/trainer.ts';
import { BigramPolicy, tmp, toyConfig, toyScenario } from './toy.ts';

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
