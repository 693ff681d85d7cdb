import assert from 'node:assert/strict';
import test from 'node:test';
import { checkScenario, replayRecord, rollout } from 'agent-r1-ts';
import scenario from '../index.ts';

test('scenario check finds no problems', async () => {
  const { problems, warnings } = await checkScenario(scenario);
  assert.deepEqual(problems, []);
  assert.deepEqual(warnings, []);
});

test('the expert remembers every fact, and its episodes replay from their records', async () => {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { summary, records } = await rollout({ scenario, policy, split: 'dev', episodes: 10, seed: 1 });
  assert.equal(summary.successRate, 1);
  for (const record of records) assert.ok((await replayRecord(record, scenario)).verified, record.episodeId);
});
