import { defineScenario, type EpisodeRecord, type Scenario, type Summarizer, type Task } from 'agent-r1-ts';
import { gridEnv } from './env.ts';
import { DEFAULT_NOISY_GRID_RATES, expert, noisyExpert, random } from './policies.ts';
import { gridTaskById, gridTasks, LARGE_MAX_TURNS, LARGE_SPLITS, MAX_TURNS, SPLITS } from './tasks.ts';
import { gridTools } from './tools.ts';
import type { GridState } from './world.ts';
import { gridMachine } from './world-machine.ts';

const METRICS = { escapedRate: 'escaped', fellRate: 'fell', keyRate: 'key', doorRate: 'door', meanMoves: 'moves' };

/** Per episode: how often it escaped, fell, got the key, opened the door; how many moves it made. */
function summarizer(): Summarizer<{ [name: string]: number }, number[]> {
  let n = 0;
  const sums = Object.fromEntries(Object.keys(METRICS).map((name) => [name, 0]));
  return {
    // The episode's metrics, in METRICS's order.
    digest: (record: EpisodeRecord) => Object.values(METRICS).map((metric) => record.outcome.metrics?.[metric] ?? 0),
    add(values) {
      n++;
      Object.keys(METRICS).forEach((name, i) => (sums[name]! += values[i]!));
    },
    result: () => Object.fromEntries(Object.entries(sums).map(([name, sum]) => [name, sum / Math.max(1, n)])),
  };
}

/** The small gridworld, fully observed, as it has always been (no options). */
export const gridworld: Scenario<Task, GridState> = {
  id: 'gridworld',
  version: '1',
  description:
    'A slippery dungeon with pits, a key and a stiff locked door: moves slip sideways and locks stick with probabilities the world draws; ' +
    'process rewards for the key and the door, outcome = reaching the exit.',
  splits: SPLITS,
  options: {},
  tasks: ({ split, seed, count }) => gridTasks(split, seed, count),
  task: (id) => gridTaskById(id),
  tools: gridTools,
  env: gridEnv,
  policies: { expert: () => expert, random: () => random },
  worldMachine: gridMachine,
  episode: { maxTurns: MAX_TURNS, maxTokensPerTurn: 128, maxTotalTokens: 16384 },
  summarizer,
};

/**
 * Options: `size=large` is the long-horizon, partially observed dungeon (15 × 9, dark: the agent
 * sees two cells around it; episodes of 20–40 turns; an ood split of stacked rooms, a layout family
 * training never shows) with a `noisy-expert` whose habits come at the rates `noisyStuck`,
 * `noisyPits` (default 0.5 each) and `noisyDoor` (default 0): giving up at a stuck lock, walking into
 * pits, giving up at the locked door without trying the key.
 */
export default defineScenario((options: { [key: string]: string }): Scenario<Task, GridState> => {
  const { size = 'small', noisyStuck, noisyPits, noisyDoor, ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0)
    throw new Error(`gridworld: unknown option ${unknown[0]}; valid: size, noisyStuck, noisyPits, noisyDoor`);
  if (size === 'small') {
    if (noisyStuck !== undefined || noisyPits !== undefined || noisyDoor !== undefined)
      throw new Error('gridworld: the noisy expert needs size=large');
    return gridworld;
  }
  if (size !== 'large') throw new Error(`gridworld: size must be small or large, got "${size}"`);
  const rates = {
    quitWhenStuck: rate('noisyStuck', noisyStuck, DEFAULT_NOISY_GRID_RATES.quitWhenStuck),
    ignorePits: rate('noisyPits', noisyPits, DEFAULT_NOISY_GRID_RATES.ignorePits),
    quitAtDoor: rate('noisyDoor', noisyDoor, DEFAULT_NOISY_GRID_RATES.quitAtDoor),
  };
  return {
    ...gridworld,
    description:
      'A large dark dungeon: the agent sees two cells around it; fetch the key, unlock the stiff door, reach the exit over 20–40 slippery turns.',
    splits: LARGE_SPLITS,
    options,
    tasks: ({ split, seed, count }) => gridTasks(split, seed, count, 'large'),
    task: (id) => gridTaskById(id, 'large'),
    policies: { expert: () => expert, 'noisy-expert': ({ seed }) => noisyExpert(seed, rates), random: () => random },
    episode: { maxTurns: LARGE_MAX_TURNS, maxTokensPerTurn: 48, maxTotalTokens: 32768 },
  };
});

function rate(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const x = Number(text);
  if (text.trim() === '' || !(x >= 0 && x <= 1)) throw new Error(`gridworld: ${name} must be in [0, 1], got "${text}"`);
  return x;
}
