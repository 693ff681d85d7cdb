import type { Policy, PolicyOutput } from 'agent-r1-ts';
import type { RoomTask } from './tasks.ts';

const call = (name: string, args: object): PolicyOutput => ({
  text: `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`,
});

/**
 * The reference policy: reads the thermostat, heats or cools, waits just long enough, switches off,
 * answers; after a failed ignition it switches off and tries again. It decides from the last
 * readout only, so it needs no memory and draws nothing (its `seed` input would be the place).
 */
export const expert: Policy = {
  id: 'expert',
  version: '1',
  act: async ({ task, messages }) => {
    const { target } = (task as RoomTask).meta;
    const last = messages.at(-1);
    if (last?.role !== 'tool') return call('read_thermostat', {});
    const { celsius, state } = JSON.parse(last.content) as { celsius: number; state: string };
    if (state === 'fault') return call('set_mode', { mode: 'off' });
    if (celsius === target) {
      if (state !== 'off') return call('set_mode', { mode: 'off' });
      return { text: `<answer>The room is at ${celsius} °C and the unit is off.</answer>` };
    }
    const needed = celsius < target ? 'heating' : 'cooling';
    if (state === needed) return call('wait', { minutes: 5 * Math.abs(target - celsius) });
    if (state !== 'off') return call('set_mode', { mode: 'off' });
    return call('set_mode', { mode: needed === 'heating' ? 'heat' : 'cool' });
  },
};
