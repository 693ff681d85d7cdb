import test from 'ava';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { train } from '../../src/rl/trainer.ts';
import { config, load, scenario } from '../helpers/guessing-pair.ts';
import { tmp } from './toy.ts';

// (slow suite) Two roles trained together resume exactly: a co-trained run stopped after one step and
// resumed ends with the weights of both roles and the records of a run that was not stopped.

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
