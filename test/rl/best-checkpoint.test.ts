import test from 'ava';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BestDevCheckpoint, devScore, type DevEval } from '../../src/rl/best-checkpoint.ts';
import type { TrainablePolicy } from '../../src/rl/trainable.ts';

/** A policy whose saved form names the step it was saved at. */
const at = (step: number) => {
  const save = async (dir: string) => {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'step'), String(step));
  };
  return { save } as unknown as TrainablePolicy;
};
const ev = (step: number, em: number): DevEval => ({ step, split: 'dev', success: 0, outcome: { em } });
const savedStep = (dir: string) => readFile(join(dir, 'best', 'step'), 'utf8');
const record = async (dir: string) => JSON.parse(await readFile(join(dir, 'best', 'best.json'), 'utf8'));

test('devScore is EM where the scenario reports it, else success', (t) => {
  t.is(devScore({ outcome: { em: 0.25 }, success: 1 }), 0.25);
  t.is(devScore({ outcome: {}, success: 0.5 }), 0.5);
});

test('the best dev checkpoint: trained steps only, ties to the later step, a worse eval leaves it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'best-'));
  const best = BestDevCheckpoint.fresh(dir);
  await best.consider(at(0), ev(0, 0.9));
  t.is(best.best, null, 'step 0 is the initial policy');
  t.false(existsSync(join(dir, 'best')));
  await best.consider(at(2), ev(2, 0.5));
  await best.consider(at(4), ev(4, 0.5));
  await best.consider(at(6), ev(6, 0.4));
  t.deepEqual(best.best, { step: 4, devScore: 0.5, dir: join(dir, 'best') });
  t.is(await savedStep(dir), '4');
  t.deepEqual(await record(dir), { step: 4, devScore: 0.5, split: 'dev' });
});

test('on resume: best/ is mended from the kept checkpoint, or no best is claimed until an eval as good', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'best-'));
  // best/ from a later step than the kept evals (a crash after it): step 2's checkpoint is copied in
  await BestDevCheckpoint.fresh(dir).consider(at(6), ev(6, 0.9));
  const kept = join(dir, 'checkpoints', 'step-000002', 'policy');
  await mkdir(kept, { recursive: true });
  await writeFile(join(kept, 'step'), '2');
  const resumed = await BestDevCheckpoint.restore(dir, [ev(0, 0.8), ev(2, 0.3)]);
  t.deepEqual(resumed.best, { step: 2, devScore: 0.3, dir: join(dir, 'best') });
  t.is(await savedStep(dir), '2');
  t.deepEqual(await record(dir), { step: 2, devScore: 0.3, split: 'dev' });
  // that step's checkpoint no longer kept: no best, and a worse eval does not claim it
  const lost = await BestDevCheckpoint.restore(dir, [ev(4, 0.7)]);
  t.is(lost.best, null);
  t.false(existsSync(join(dir, 'best')));
  await lost.consider(at(5), ev(5, 0.6));
  t.is(lost.best, null);
  await lost.consider(at(6), ev(6, 0.7));
  t.is(lost.best?.step, 6);
  // no trained eval kept: no best
  t.is((await BestDevCheckpoint.restore(dir, [ev(0, 1)])).best, null);
  t.false(existsSync(join(dir, 'best')));
});
