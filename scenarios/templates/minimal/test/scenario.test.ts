import assert from 'node:assert/strict';
import test from 'node:test';
import { checkScenario, rollout } from 'agent-r1-ts';
import scenario from '../index.ts';

test('scenario check finds no problems', async () => {
  const { problems, warnings } = await checkScenario(scenario);
  assert.deepEqual(problems, []);
  assert.deepEqual(warnings, []);
});

test('the expert answers every task', async () => {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { summary } = await rollout({ scenario, policy, split: 'dev', episodes: 20, seed: 1 });
  assert.equal(summary.successRate, 1);
});
