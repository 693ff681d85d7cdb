import {
  canonicalJson,
  formatInvalidAction,
  toolsSystemPrompt,
  effectsOf,
  syncEffects,
  withoutEffects,
  type Json,
  type StepResult,
  type Task,
  type ToolResult,
  type ToolEnv,
} from 'agent-r1-ts';
import { applyGridEffect, createGridState, view, type GridEffect, type GridState } from './world.ts';

/** Process rewards for progress: the key picked up, the door opened (each happens once). */
export const GRID_REWARDS = { key: 0.2, door: 0.2, invalidAction: -0.1, failedCall: -0.05, escaped: 1 };

const INSTRUCTIONS =
  'You explore a grid dungeon with tools. Each turn, call one tool. The game ends when you reach the exit or fall into a pit.';

function render(result: ToolResult): string {
  if (!result.ok) return `[${result.name}] error: ${result.content}`;
  return `[${result.name}] ${result.data !== undefined && !result.truncated ? canonicalJson(withoutEffects(result.data)) : result.content}`;
}

/** The world transitions a turn's results carry, as events. */
function eventsOf(results: readonly ToolResult[]) {
  return results.flatMap((r) => effectsOf<GridEffect>(r).map((e) => e.event));
}

export const gridEnv: ToolEnv<Task, GridState> = {
  init: (task) => createGridState(task),
  dispose: (state) => {
    state.world.stop();
  },
  prompt: (task, tools) => [
    { role: 'system', content: toolsSystemPrompt(INSTRUCTIONS, tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ state, action, results }): StepResult => {
    // In replay the tools did not run: send the recorded events to the world machine.
    syncEffects(state, results, (e: GridEffect) => applyGridEffect(state, e));
    const v = view(state);
    const done = v.fell || v.escaped;
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid')
      return { observation: formatInvalidAction(action), reward: GRID_REWARDS.invalidAction, done };
    const events = eventsOf(results);
    const key = events.some((e) => e.type === 'PICK_UP');
    const door = events.some((e) => e.type === 'UNLOCK' && e.success);
    const failed = results.filter((r) => !r.ok).length;
    const reward = (key ? GRID_REWARDS.key : 0) + (door ? GRID_REWARDS.door : 0) + failed * GRID_REWARDS.failedCall;
    const info: { [key: string]: Json } = { position: v.position };
    if (key) info['key'] = true;
    if (door) info['door'] = true;
    if (v.fell) info['fell'] = true;
    if (v.escaped) info['escaped'] = true;
    return { observation: results.map(render).join('\n'), reward: Math.round(reward * 1e6) / 1e6, done, info };
  },
  // The state card: where the agent stands, what it carries, and what its last action did.
  card: ({ state, history }) => {
    const v = view(state);
    const last = history.at(-1);
    return [
      `Position (x, y): ${v.position.join(', ')}. Key: ${v.has_key ? 'carried' : 'not carried'}. Door: ${v.door_open ? 'open' : 'locked'}.`,
      `Turns so far: ${history.length}.`,
      ...(last ? [`Last action: ${last.text}`, `Result: ${last.observation ?? '(none)'}`] : []),
    ].join('\n');
  },
  outcome: ({ state }) => {
    const v = view(state);
    return {
      reward: v.escaped ? GRID_REWARDS.escaped : 0,
      success: v.escaped,
      metrics: {
        escaped: Number(v.escaped),
        fell: Number(v.fell),
        key: Number(v.has_key),
        door: Number(v.door_open),
        moves: state.world.getSnapshot().context.moves,
      },
    };
  },
};
