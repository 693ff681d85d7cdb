import { hash } from 'node:crypto';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { serializeRecord } from '../../src/record/record.ts';

/**
 * Every built-in scenario with each of its reference policies, and budgets that end episodes early:
 * the cases whose record bytes are pinned in records-pinned.test.ts. A change to the engine that
 * changes a record's bytes changes one of these digests.
 */
export const goldenCases = [
  ...['calculator', 'multihop-qa', 'support-desk', 'gridworld', 'files'].map((name) => ({ name, config: {} })),
  { name: 'calculator', config: { maxTurns: 1 } },
  { name: 'multihop-qa', config: { maxTotalTokens: 300 } },
  { name: 'calculator', config: { maxTokensPerTurn: 8 } },
];

/** sha256 of the lines of 12 episodes per (case, policy), keyed "scenario policy config". */
export async function goldenDigests(): Promise<{ [key: string]: string }> {
  const digests: { [key: string]: string } = {};
  for (const { name, config } of goldenCases) {
    const scenario = await loadScenario(name, builtinScenarios);
    for (const policyName of Object.keys(scenario.policies).sort()) {
      const policy = await scenario.policies[policyName]!({ scenario, seed: 0 });
      const { records } = await rollout({ scenario, policy, split: 'train', episodes: 12, group: 2, seed: 5, config });
      digests[`${name} ${policyName} ${JSON.stringify(config)}`] = hash(
        'sha256',
        records.map((r) => serializeRecord(r) + '\n').join(''),
      );
    }
  }
  return digests;
}
