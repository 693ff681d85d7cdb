import test from 'ava';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { call, toyScenario } from '../helpers/toy-scenario.ts';

const scenario = toyScenario();
const task = { id: 'toy-0', split: 'train', question: 'say 42', answer: '42' };

/** A policy that acts once, then fails (an API that gave up, a client that went away). */
const failing: Policy = {
  id: 'flaky',
  version: '1',
  act: async ({ turn }) => {
    if (turn === 0) return { text: call('roll') };
    throw new Error('the endpoint went away');
  },
};

test('an episode whose policy failed replays verified: the failure is raised again where the record stops', async (t) => {
  const record = await runEpisode({ scenario, task, policy: failing, seed: 3 });
  t.like(record, { status: 'error', endReason: 'error', error: 'the endpoint went away' });
  t.is(record.turns.length, 1);
  t.true((await replayRecord(record, scenario)).verified);
});
