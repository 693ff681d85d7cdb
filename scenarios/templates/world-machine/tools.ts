import { z } from 'zod';
import { commitEffect, tool, type Json, type ToolContext } from 'agent-r1-ts';
import { applyEffect, hvacState, readout, type HvacEvent, type Room, type RoomEffect } from './world.ts';

type Ctx = ToolContext<Room>;

/** The chance that the unit fails to ignite: drawn from the episode's world stream (ctx.rng). */
export const IGNITION_FAILS = 0.25;
/** Degrees per 5 minutes while heating or cooling. */
const RATE = 1;

/** Applies a change now and returns it numbered, for the result's `effects` (replay re-applies it). */
const commit = (room: Room, effect: RoomEffect) => commitEffect(room, effect, (e) => applyEffect(room, e));

export const readThermostat = tool({
  name: 'read_thermostat',
  description: 'Read the room temperature (°C) and the state of the HVAC unit.',
  parameters: z.object({}),
  execute: (_args, ctx: Ctx) => readout(ctx.state),
});

export const setMode = tool({
  name: 'set_mode',
  description: 'Switch the HVAC unit to heat, cool or off. Heating needs an ignition, which sometimes fails.',
  parameters: z.object({ mode: z.enum(['heat', 'cool', 'off']) }),
  execute: ({ mode }, ctx: Ctx): Json => {
    const room = ctx.state;
    const wanted: HvacEvent = mode === 'heat' ? 'HEAT' : mode === 'cool' ? 'COOL' : 'STOP';
    if (!room.hvac.getSnapshot().can({ type: wanted })) {
      // A refusal is a result, not an exception: nothing changes, and the agent reads why.
      return { refused: true, message: `cannot ${mode} while the unit is ${hvacState(room)}`, ...readout(room) };
    }
    // Tools draw, machines don't: the draw comes from ctx.rng, and its outcome is in the effect.
    const event = wanted === 'HEAT' && ctx.rng.chance(IGNITION_FAILS) ? 'IGNITION_FAILED' : wanted;
    const effects = [commit(room, { kind: 'hvac', event })];
    return { ...readout(room), effects };
  },
});

export const wait = tool({
  name: 'wait',
  description: 'Let time pass: the room warms while heating and cools while cooling, 1 °C per 5 minutes.',
  parameters: z.object({ minutes: z.number().int().min(5).max(60) }),
  execute: ({ minutes }, ctx: Ctx): Json => {
    const room = ctx.state;
    const direction = { heating: 1, cooling: -1, off: 0, fault: 0 }[hvacState(room)];
    const celsius = room.celsius + direction * RATE * Math.floor(minutes / 5);
    const effects = celsius === room.celsius ? [] : [commit(room, { kind: 'temperature', celsius })];
    return { ...readout(room), effects };
  },
});

export const tools = [readThermostat, setMode, wait];
