import { createActor, setup, type Actor } from 'xstate';
import type { EffectLog } from 'agent-r1-ts';

/**
 * The world machine: the HVAC unit's own states. The rules live here (heat or cool only from off; a
 * failed ignition is a fault until the unit is switched off), and tools ask it with `snapshot.can`.
 * It is deterministic: whether an ignition fails is drawn by the tool and sent as a plain event.
 */
export const hvacMachine = setup({
  types: { events: {} as { type: HvacEvent } },
}).createMachine({
  id: 'hvac',
  initial: 'off',
  states: {
    off: { on: { HEAT: 'heating', COOL: 'cooling', IGNITION_FAILED: 'fault' } },
    heating: { on: { STOP: 'off' } },
    cooling: { on: { STOP: 'off' } },
    fault: { on: { STOP: 'off' } },
  },
});

export type HvacEvent = 'HEAT' | 'COOL' | 'STOP' | 'IGNITION_FAILED';
export type HvacState = 'off' | 'heating' | 'cooling' | 'fault';

/**
 * Every change to the world, as data. Tools make them with commitEffect (applied at once, and put
 * in the result); env.step re-applies recorded ones with syncEffects (replay). One type for both.
 */
export type RoomEffect = { kind: 'hvac'; event: HvacEvent } | { kind: 'temperature'; celsius: number };

/** One episode's world: its own actor and temperature (made in env.init, never shared). */
export interface Room extends EffectLog {
  hvac: Actor<typeof hvacMachine>;
  celsius: number;
}

export function createRoom(celsius: number): Room {
  return { hvac: createActor(hvacMachine).start(), celsius, applied: 0 };
}

export function applyEffect(room: Room, effect: RoomEffect): void {
  if (effect.kind === 'hvac') room.hvac.send({ type: effect.event });
  else room.celsius = effect.celsius;
}

export const hvacState = (room: Room): HvacState => room.hvac.getSnapshot().value as HvacState;

/** What a tool shows the agent. `state` names a world-machine state: the viewer highlights it. */
export const readout = (room: Room) => ({ celsius: room.celsius, state: hvacState(room) });
