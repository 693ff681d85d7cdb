import { defineScenario, type Scenario } from 'agent-r1-ts';
import { env } from './env.ts';
import { expert } from './policies.ts';
import { roomTasks, SPLITS, type RoomTask } from './tasks.ts';
import { tools } from './tools.ts';
import { hvacMachine, type Room } from './world.ts';

/** The scenario: `agent-r1 scenario check .`, `agent-r1 rollout --scenario . …` load this default export. */
const scenario: Scenario<RoomTask, Room> = {
  id: 'thermostat',
  version: '1',
  description: 'Bring a room to a target temperature with an HVAC unit whose ignition sometimes fails.',
  splits: SPLITS,
  options: {},
  tasks: roomTasks,
  tools,
  env,
  policies: { expert: () => expert },
  worldMachine: hvacMachine,
  episode: { maxTurns: 16 },
};

export default defineScenario(scenario);
