import { defineScenario, type EpisodeRecord, type Scenario, type Summarizer, type Task } from 'agent-r1-ts';
import { gridEnv } from './env.ts';
import { expert, random } from './policies.ts';
import { gridTasks, MAX_TURNS, SPLITS } from './tasks.ts';
import { gridTools } from './tools.ts';
import type { GridState } from './world.ts';
import { gridMachine } from './world-machine.ts';

const METRICS = { escapedRate: 'escaped', fellRate: 'fell', keyRate: 'key', doorRate: 'door', meanMoves: 'moves' };

/** Per episode: how often it escaped, fell, got the key, opened the door; how many moves it made. */
function summarizer(): Summarizer {
  let n = 0;
  const sums = Object.fromEntries(Object.keys(METRICS).map((name) => [name, 0]));
  return {
    add(record: EpisodeRecord) {
      n++;
      for (const [name, metric] of Object.entries(METRICS)) sums[name]! += record.outcome.metrics?.[metric] ?? 0;
    },
    result: () => Object.fromEntries(Object.entries(sums).map(([name, sum]) => [name, sum / Math.max(1, n)])),
  };
}

const scenario: Scenario<Task, GridState> = {
  id: 'gridworld',
  version: '1',
  description:
    'A slippery dungeon with pits, a key and a stiff locked door: moves slip sideways and locks stick with probabilities the world draws; ' +
    'process rewards for the key and the door, outcome = reaching the exit.',
  splits: SPLITS,
  options: {},
  tasks: ({ split, seed, count }) => gridTasks(split, seed, count),
  tools: gridTools,
  env: gridEnv,
  policies: { expert: () => expert, random: () => random },
  worldMachine: gridMachine,
  episode: { maxTurns: MAX_TURNS, maxTokensPerTurn: 128, maxTotalTokens: 16384 },
  summarizer,
};

export default defineScenario(scenario);
