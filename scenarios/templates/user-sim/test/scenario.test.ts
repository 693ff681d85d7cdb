import assert from 'node:assert/strict';
import test from 'node:test';
import { checkScenario, replayRecord, rollout } from 'agent-r1-ts';
import scenario from '../index.ts';

test('scenario check finds no problems', async () => {
  const { problems, warnings } = await checkScenario(scenario);
  assert.deepEqual(problems, []);
  assert.deepEqual(warnings, []);
});

test('the expert and the scripted user fix every case, and every turn of both replays from the record', async () => {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { records, summary } = await rollout({ scenario, policy, split: 'dev', episodes: 20, seed: 1 });
  assert.equal(summary.successRate, 1);
  for (const record of records) {
    assert.equal(record.endReason, 'user_ended');
    assert.ok((await replayRecord(record, scenario)).verified);
  }
});
