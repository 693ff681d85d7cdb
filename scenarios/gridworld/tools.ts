import { z } from 'zod';
import { commitEffect, tool, type Json, type ToolContext } from 'agent-r1-ts';
import { add, DIRECTIONS, perpendicular, renderMap, renderView, samePoint, type Direction } from './layout.ts';
import { applyGridEffect, view, type GridEffect, type GridState } from './world.ts';

/**
 * The gridworld's tools. Every stochastic outcome (a slip, a stiff lock) is drawn here from the
 * episode's world stream and sent to the world machine as a plain event, which the result carries
 * as an effect, so replay re-sends the same events without drawing.
 */

type Ctx = ToolContext<GridState>;

const direction = z.enum(DIRECTIONS as [Direction, ...Direction[]]);

function commit(ctx: Ctx, event: GridEffect['event']): Json {
  return commitEffect(ctx.state, { op: 'event', event } as GridEffect & { [key: string]: Json }, (e) =>
    applyGridEffect(ctx.state, e),
  ) as Json;
}

function over(ctx: Ctx): Json | undefined {
  const v = view(ctx.state);
  if (v.fell) return { error: 'you fell into a pit: the game is over' };
  if (v.escaped) return { error: 'you have escaped: the game is over' };
  return undefined;
}

export const move = tool({
  name: 'move',
  description: 'Walk one cell north, east, south or west. The floor is slippery: you may slide to a side instead.',
  parameters: z.object({ direction }),
  execute: ({ direction: intended }, ctx: Ctx): Json => {
    const ended = over(ctx);
    if (ended) return ended;
    const { slip } = ctx.state.layout;
    const u = ctx.rng.next();
    const [left, right] = perpendicular(intended);
    const actual: Direction = u < 1 - slip ? intended : u < 1 - slip / 2 ? left : right;
    const before = ctx.state.world.getSnapshot().context.position;
    const effect = commit(ctx, { type: 'MOVE', direction: actual });
    const v = view(ctx.state);
    const after = ctx.state.world.getSnapshot().context.position;
    const what = v.fell
      ? 'you fell into a pit'
      : v.escaped
        ? 'you reached the exit'
        : samePoint(before, after)
          ? `you bumped into ${cellName(ctx, add(before, actual))}`
          : 'you moved';
    return { intended, went: actual, slipped: actual !== intended, result: what, ...v, effects: [effect] };
  },
});

function cellName(ctx: Ctx, p: { x: number; y: number }): string {
  const c = ctx.state.layout.rows[p.y]?.[p.x];
  return c === 'D' ? 'the locked door' : 'a wall';
}

export const pickUp = tool({
  name: 'pick_up',
  description: 'Pick up the key on your cell.',
  parameters: z.object({}),
  execute: (_args, ctx: Ctx): Json => {
    const ended = over(ctx);
    if (ended) return ended;
    const snap = ctx.state.world.getSnapshot();
    if (snap.matches({ key: 'carried' })) return { error: 'you already carry the key' };
    if (!snap.can({ type: 'PICK_UP' })) return { error: 'there is no key on this cell' };
    const effect = commit(ctx, { type: 'PICK_UP' });
    return { result: 'you picked up the key', ...view(ctx.state), effects: [effect] };
  },
});

export const unlock = tool({
  name: 'unlock',
  description:
    'Turn the key in the door next to you, in the given direction. The lock is stiff: it may take several tries.',
  parameters: z.object({ direction }),
  execute: ({ direction: towards }, ctx: Ctx): Json => {
    const ended = over(ctx);
    if (ended) return ended;
    const snap = ctx.state.world.getSnapshot();
    const { layout } = ctx.state;
    if (!samePoint(add(snap.context.position, towards), layout.door))
      return { error: `there is no door to the ${towards}` };
    if (snap.matches({ door: 'unlocked' })) return { error: 'the door is already open' };
    if (!snap.matches({ key: 'carried' })) return { error: 'you have no key' };
    const success = ctx.rng.chance(layout.unlock);
    const effect = commit(ctx, { type: 'UNLOCK', success });
    return {
      result: success ? 'the lock turned: the door is open' : 'the lock is stuck; try again',
      ...view(ctx.state),
      effects: [effect],
    };
  },
});

export const look = tool({
  name: 'look',
  // (In the dark dungeon, size=large, the map shows only the cells within sight.)
  description: 'Show the map with your position (@), and whether you carry the key and the door is open.',
  parameters: z.object({}),
  execute: (_args, ctx: Ctx): Json => {
    const v = view(ctx.state);
    const at = { x: v.position[0], y: v.position[1] };
    const { layout } = ctx.state;
    const map =
      layout.sight === undefined
        ? renderMap(layout, at, v.has_key, v.door_open)
        : renderView(layout, at, v.has_key, v.door_open, layout.sight);
    return { map, ...v };
  },
});

export const gridTools = [move, pickUp, unlock, look];
