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
  type TurnRecord,
} from 'agent-r1-ts';
import { surroundings, type Point } from './layout.ts';
import { wayFrom } from './planner.ts';
import { turnsOf } from './tasks.ts';
import { applyGridEffect, createGridState, layoutOf, view, type GridEffect, type GridState } from './world.ts';

/** Where a point lies from `from`, in moves: "3 east, 1 north" ("here" when it is the same cell). */
export function offset(from: Point, to: Point): string {
  const parts: string[] = [];
  if (to.x !== from.x) parts.push(`${Math.abs(to.x - from.x)} ${to.x > from.x ? 'east' : 'west'}`);
  if (to.y !== from.y) parts.push(`${Math.abs(to.y - from.y)} ${to.y > from.y ? 'south' : 'north'}`);
  return parts.length > 0 ? parts.join(', ') : 'here';
}

/** A turn's action in a few words: `move east`, `unlock north`, `look`, or what it was instead. */
function actionWords(turn: TurnRecord): string {
  const a = turn.action;
  if (a.kind === 'tool_calls')
    return a.calls.map((c) => [c.name, ...Object.values(c.arguments).map((v) => String(v))].join(' ')).join('; ');
  return a.kind === 'answer' ? 'answer' : 'an invalid action';
}

/** What a turn's first result says happened (`you moved`, `the lock is stuck; try again`, an error). */
function resultWords(turn: TurnRecord): string {
  const r = turn.results[0];
  if (!r) return turn.observation ?? 'nothing';
  if (!r.ok) return `error: ${r.content}`;
  const data = r.data as { result?: Json; error?: Json } | undefined;
  const said = data?.result ?? data?.error;
  return typeof said === 'string' ? said : 'done';
}

/**
 * The state card: where the agent stands, what it carries, where its next goal lies from here (the
 * key, then the door, then the exit) and the way there, what lies next to it, and what its last
 * action did — what an agent keeps in mind instead of the transcript (the step-level MDP's `card`
 * context). Short on purpose: a 20–40-step episode trains on it at every step.
 */
export function gridCard(state: GridState, history: readonly TurnRecord[]): string {
  const v = view(state);
  const { layout } = state;
  const here = { x: v.position[0], y: v.position[1] };
  const [goal, where] = !v.has_key
    ? ['the key', layout.key]
    : !v.door_open
      ? ['the door', layout.door]
      : ['the exit', layout.goal];
  const last = history.at(-1);
  // The way comes from the scripted expert's plan on the map the dark hides: walls two cells off
  // decide a route, and no card of a cell's neighbours shows them.
  const move = wayFrom(
    layout,
    { position: here, hasKey: v.has_key, doorOpen: v.door_open },
    turnsOf(layout) - history.length,
  );
  const way = move ? `; way ${move}` : '';
  return [
    `At ${here.x}, ${here.y}; key ${v.has_key ? 'carried' : 'not carried'}; door ${v.door_open ? 'open' : 'locked'}. Next: ${goal}, ${offset(here, where)}${way}.`,
    `Around: ${surroundings(layout, here, v.has_key, v.door_open)}.`,
    ...(last ? [`Last: ${actionWords(last)} → ${resultWords(last)}.`] : []),
  ].join('\n');
}

/** Process rewards for progress: the key picked up, the door opened (each happens once). */
export const GRID_REWARDS = { key: 0.2, door: 0.2, invalidAction: -0.1, failedCall: -0.05, escaped: 1 };

const INSTRUCTIONS =
  'You explore a grid dungeon with tools. Each turn, call one tool. The game ends when you reach the exit or fall into a pit.';

const DARK_INSTRUCTIONS = [
  'Each turn call one tool: move(direction), pick_up(), unlock(direction) or look(); directions: north, east, south, west.',
  'E.g. <tool_call>{"name": "move", "arguments": {"direction": "east"}}</tool_call>',
].join('\n');

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
    // The dark dungeon's prompt names the tools briefly: its agent reads the prompt again at every
    // one of its many steps (the step-level MDP), so each token of it is paid for forty times.
    {
      role: 'system',
      content: layoutOf(task).sight === undefined ? toolsSystemPrompt(INSTRUCTIONS, tools) : DARK_INSTRUCTIONS,
    },
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
  card: ({ state, history }) => gridCard(state, history),
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
