import { createRng, type Json, type Message, type Task, type Policy } from 'agent-r1-ts';
import { DIRECTIONS } from './layout.ts';
import { plan, type WorldView } from './planner.ts';
import { MAX_TURNS } from './tasks.ts';
import { layoutOf } from './world.ts';

const call = (name: string, args: { [key: string]: Json }) => ({
  text: `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`,
});

/** The world as the last observation describes it (the start, before any). */
export function currentView(task: Task, messages: readonly Message[]): WorldView {
  const layout = layoutOf(task);
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'tool') continue;
    for (const line of m.content.split('\n').reverse()) {
      const match = /^\[[a-z_]+\] (\{.*\})$/.exec(line);
      if (!match) continue;
      try {
        const data = JSON.parse(match[1]!);
        if (Array.isArray(data.position)) {
          return {
            position: { x: data.position[0], y: data.position[1] },
            hasKey: data.has_key === true,
            doorOpen: data.door_open === true,
          };
        }
      } catch {
        // not a state line
      }
    }
  }
  return { position: layout.start, hasKey: false, doorOpen: false };
}

/** Plans with the world's probabilities (value iteration over the turns left) and re-plans every turn. */
export const expert: Policy = {
  id: 'expert',
  version: 'gridworld-expert-1',
  act: async ({ task, messages, turn }) => {
    const { action } = plan(layoutOf(task), currentView(task, messages), MAX_TURNS - turn);
    switch (action.kind) {
      case 'move':
        return call('move', { direction: action.direction });
      case 'pick_up':
        return call('pick_up', {});
      case 'unlock':
        return call('unlock', { direction: action.direction });
    }
  },
};

/** Uniformly random tool calls, from the turn's sampler seed. */
export const random: Policy = {
  id: 'random',
  version: 'gridworld-random-1',
  act: async ({ seed }) => {
    const rng = createRng(seed);
    const r = rng.int(0, 9);
    if (r < 6) return call('move', { direction: rng.pick(DIRECTIONS) });
    if (r < 7) return call('pick_up', {});
    if (r < 9) return call('unlock', { direction: rng.pick(DIRECTIONS) });
    return call('look', {});
  },
};
