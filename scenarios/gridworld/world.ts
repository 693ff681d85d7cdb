import { createActor, type Actor } from 'xstate';
import { ScenarioError, type EffectLog, type Task } from 'agent-r1-ts';
import type { Layout } from './layout.ts';
import { gridMachine, type GridEvent, type GridMachine } from './world-machine.ts';

/** One episode's world: the grid machine's actor, and the count of events it has seen (for replay). */
export interface GridState extends EffectLog {
  layout: Layout;
  world: Actor<GridMachine>;
}

export type GridEffect = { op: 'event'; event: GridEvent };

export function layoutOf(task: Task): Layout {
  const layout = task.meta?.['layout'] as unknown as Layout | undefined;
  if (!layout || !Array.isArray(layout.rows) || typeof layout.slip !== 'number') {
    throw new ScenarioError(`gridworld task ${task.id} has no valid meta.layout`);
  }
  return layout;
}

export function createGridState(task: Task): GridState {
  const layout = layoutOf(task);
  return { layout, world: createActor(gridMachine, { input: { layout } }).start(), applied: 0 };
}

export function applyGridEffect(state: GridState, effect: GridEffect): void {
  state.world.send(effect.event);
}

/** What the agent can know about the world now. */
export function view(state: GridState) {
  const snap = state.world.getSnapshot();
  return {
    position: [snap.context.position.x, snap.context.position.y] as [number, number],
    has_key: snap.matches({ key: 'carried' }),
    door_open: snap.matches({ door: 'unlocked' }),
    fell: snap.matches({ agent: 'fell' }),
    escaped: snap.matches({ agent: 'escaped' }),
  };
}
