import {
  canonicalJson,
  formatInvalidAction,
  syncEffects,
  toolsSystemPrompt,
  withoutEffects,
  type ToolEnv,
  type ToolResult,
} from 'agent-r1-ts';
import type { RoomTask } from './tasks.ts';
import { applyEffect, createRoom, hvacState, type Room, type RoomEffect } from './world.ts';

const INSTRUCTIONS =
  'You control a room thermostat with tools. Heating may fail to ignite: then switch the unit off and try again.';

/** What the agent reads: the result without its effects log (replay bookkeeping, not information). */
function show(result: ToolResult): string {
  if (!result.ok) return `Error: ${result.content}`;
  return result.data !== undefined && !result.truncated ? canonicalJson(withoutEffects(result.data)) : result.content;
}

export const env: ToolEnv<RoomTask, Room> = {
  // Per-episode state: made here, so episodes running at once never share a world.
  init: (task) => createRoom(task.meta.start),
  dispose: (room) => void room.hvac.stop(),
  prompt: (task, tools) => [
    { role: 'system', content: toolsSystemPrompt(INSTRUCTIONS, tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ task, state: room, action, results, history }) => {
    // First: in replay the tools did not run, so apply the effects they recorded (live: nothing to do).
    syncEffects(room, results, (e: RoomEffect) => applyEffect(room, e));
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid') return { observation: formatInvalidAction(action), reward: -0.1, done: false };
    // Process reward: +0.2 the first time the room reaches the target.
    const reached = room.celsius === task.meta.target && !history.some((t) => t.info?.['reached'] === true);
    return {
      observation: results.map(show).join('\n'),
      reward: reached ? 0.2 : 0,
      done: false,
      info: { celsius: room.celsius, state: hvacState(room), ...(reached ? { reached: true } : {}) },
    };
  },
  // The outcome is judged from the world, so replay must rebuild the world exactly (syncEffects).
  outcome: ({ task, state: room }) => {
    const success = room.celsius === task.meta.target && hvacState(room) === 'off';
    return { reward: success ? 1 : 0, success };
  },
};
