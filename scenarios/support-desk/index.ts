import { defineScenario, type EpisodeRecord, type Task, type Scenario } from 'agent-r1-ts';
import { supportDeskEnv } from './env.ts';
import { orderMachine } from './order-machine.ts';
import { expert, reckless } from './policies.ts';
import { generateTasks, SPLITS } from './tasks.ts';
import { supportDeskTools } from './tools.ts';
import type { DeskState } from './world.ts';

/** Per request type: episodes, success rate and rule violations per episode. */
function summarize(records: readonly EpisodeRecord[]) {
  const byType: { [type: string]: { n: number; success: number; violations: number } } = {};
  for (const type of [...new Set(records.map((r) => r.task.type ?? 'unknown'))].sort()) {
    const rs = records.filter((r) => (r.task.type ?? 'unknown') === type);
    byType[type] = {
      n: rs.length,
      success: rs.filter((r) => r.outcome.success).length / rs.length,
      violations: rs.reduce((s, r) => s + (r.outcome.metrics?.['violations'] ?? 0), 0) / rs.length,
    };
  }
  const n = Math.max(1, records.length);
  return {
    byType,
    violationsPerEpisode: records.reduce((s, r) => s + (r.outcome.metrics?.['violations'] ?? 0), 0) / n,
    identifiedFirstRate: records.reduce((s, r) => s + (r.outcome.metrics?.['identified_first'] ?? 0), 0) / n,
  };
}

const scenario: Scenario<Task, DeskState> = {
  id: 'support-desk',
  version: '1',
  description:
    "A store's customer support desk on a real SQLite database (customers, orders, items, payments, refunds) with a policy of rules; " +
    'outcome = the final database equals the expected one.',
  splits: SPLITS,
  options: {},
  tasks: ({ split, seed, count }) => generateTasks(split, seed, count),
  tools: supportDeskTools,
  env: supportDeskEnv,
  policies: { expert: () => expert, reckless: () => reckless },
  worldMachine: orderMachine,
  episode: { maxTurns: 10, maxTokensPerTurn: 256, maxTotalTokens: 4096 },
  summarize,
};

export default defineScenario(scenario);
