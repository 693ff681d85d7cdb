import { defineScenario, type EpisodeRecord, type Task, type Scenario } from 'agent-r1-ts';
import { gridEnv } from './env.ts';
import { expert, random } from './policies.ts';
import { gridTasks, MAX_TURNS, SPLITS } from './tasks.ts';
import { gridTools } from './tools.ts';
import type { GridState } from './world.ts';
import { gridMachine } from './world-machine.ts';

function summarize(records: readonly EpisodeRecord[]) {
  const n = Math.max(1, records.length);
  const mean = (k: string) => records.reduce((s, r) => s + (r.outcome.metrics?.[k] ?? 0), 0) / n;
  return {
    escapedRate: mean('escaped'),
    fellRate: mean('fell'),
    keyRate: mean('key'),
    doorRate: mean('door'),
    meanMoves: mean('moves'),
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
  summarize,
};

export default defineScenario(scenario);
