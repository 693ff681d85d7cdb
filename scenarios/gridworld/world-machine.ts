import { and, assign, setup, stateIn } from 'xstate';
import { add, cellAt, samePoint, type Direction, type Layout, type Point } from './layout.ts';

/**
 * The gridworld's world machine: three parallel regions: where the agent is (exploring, or it fell
 * into a pit, or it escaped through the goal), the key (on the floor or carried) and the door
 * (locked or unlocked). The machine is deterministic: a MOVE carries the direction the agent
 * actually went (after any slip) and an UNLOCK whether the stiff lock turned; the tools draw those
 * from the episode's world stream, so replaying the events reproduces the world exactly.
 */

export interface GridContext {
  layout: Layout;
  position: Point;
  moves: number;
}

export type GridEvent =
  | { type: 'MOVE'; direction: Direction }
  | { type: 'PICK_UP' }
  | { type: 'UNLOCK'; success: boolean };

/** Where a move in `direction` ends: blocked by walls, and by the door while it is locked. */
function destination(context: GridContext, direction: Direction, doorOpen: boolean): Point {
  const next = add(context.position, direction);
  const cell = cellAt(context.layout, next);
  if (cell === '#' || (cell === 'D' && !doorOpen)) return context.position;
  return next;
}

const alive = stateIn('#grid.agent.exploring');

/**
 * The world a machine started without input runs in (as `scenario check` and the viewer start it):
 * a two-room dungeon with the key, the door and the exit in a row.
 */
export const DEMO_LAYOUT: Layout = {
  width: 7,
  height: 3,
  rows: ['#######', '#.KD.G#', '#######'],
  start: { x: 1, y: 1 },
  key: { x: 2, y: 1 },
  door: { x: 3, y: 1 },
  goal: { x: 5, y: 1 },
  slip: 0,
  unlock: 1,
};

export const gridMachine = setup({
  types: {
    context: {} as GridContext,
    events: {} as GridEvent,
    input: {} as { layout?: Layout } | undefined,
  },
  actions: {
    moveWithDoorLocked: assign(({ context, event }) =>
      event.type === 'MOVE' ? { position: destination(context, event.direction, false), moves: context.moves + 1 } : {},
    ),
    moveWithDoorOpen: assign(({ context, event }) =>
      event.type === 'MOVE' ? { position: destination(context, event.direction, true), moves: context.moves + 1 } : {},
    ),
  },
  guards: {
    inPit: ({ context }) => cellAt(context.layout, context.position) === 'O',
    atGoal: ({ context }) => samePoint(context.position, context.layout.goal),
    atKey: ({ context }) => samePoint(context.position, context.layout.key),
    lockTurns: ({ context, event }) =>
      event.type === 'UNLOCK' &&
      event.success &&
      Math.abs(context.position.x - context.layout.door.x) + Math.abs(context.position.y - context.layout.door.y) === 1,
  },
}).createMachine({
  id: 'grid',
  type: 'parallel',
  context: ({ input }) => {
    const layout = input?.layout ?? DEMO_LAYOUT;
    return { layout, position: layout.start, moves: 0 };
  },
  states: {
    agent: {
      initial: 'exploring',
      states: {
        exploring: {
          always: [
            { guard: 'inPit', target: 'fell' },
            { guard: 'atGoal', target: 'escaped' },
          ],
        },
        fell: { type: 'final' },
        escaped: { type: 'final' },
      },
    },
    key: {
      initial: 'onFloor',
      states: {
        onFloor: { on: { PICK_UP: { guard: and([alive, 'atKey']), target: 'carried' } } },
        carried: {},
      },
    },
    // The door decides where moves end, so movement is handled in its region.
    door: {
      initial: 'locked',
      states: {
        locked: {
          on: {
            MOVE: { guard: alive, actions: 'moveWithDoorLocked' },
            UNLOCK: { guard: and([stateIn('#grid.key.carried'), 'lockTurns']), target: 'unlocked' },
          },
        },
        unlocked: {
          on: { MOVE: { guard: alive, actions: 'moveWithDoorOpen' } },
        },
      },
    },
  },
});

export type GridMachine = typeof gridMachine;
