import assert from 'node:assert/strict';
import test from 'node:test';
import { checkScenario, replayRecord, rollout } from 'agent-r1-ts';
import scenario from '../index.ts';

test('scenario check finds no problems', async () => {
  const { problems, warnings } = await checkScenario(scenario);
  assert.deepEqual(problems, []);
  assert.deepEqual(warnings, []);
});

test('the expert succeeds on the dev split, and every episode replays', async () => {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { records, summary } = await rollout({ scenario, policy, split: 'dev', episodes: 20, seed: 1 });
  assert.ok(summary.successRate >= 0.95, `success rate ${summary.successRate}`);
  for (const record of records) assert.equal((await replayRecord(record, scenario)).verified, true);
});
