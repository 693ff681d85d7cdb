import {
  add,
  cellAt,
  DIRECTIONS,
  directionTo,
  perpendicular,
  samePoint,
  type Direction,
  type Layout,
  type Point,
} from './layout.ts';

/**
 * Planning under uncertainty for the gridworld: finite-horizon value iteration over (cell, key
 * carried, door open), with the world's own probabilities (slips, a stiff lock). The value is the
 * discounted probability of reaching the goal within the turns left; pits are worth 0. The expert
 * takes the best action of the current state each turn, so it re-plans after every slip.
 */

export type PlanAction =
  | { kind: 'move'; direction: Direction }
  | { kind: 'pick_up' }
  | { kind: 'unlock'; direction: Direction };

export interface WorldView {
  position: Point;
  hasKey: boolean;
  doorOpen: boolean;
}

const DISCOUNT = 0.99;

interface Outcome {
  p: number;
  next: WorldView;
}

function moveTo(layout: Layout, s: WorldView, d: Direction): WorldView {
  const next = add(s.position, d);
  const cell = cellAt(layout, next);
  if (cell === '#' || (cell === 'D' && !s.doorOpen)) return s;
  return { ...s, position: next };
}

/** The actions that can change anything in state s (the planner ignores no-ops). */
export function actionsIn(layout: Layout, s: WorldView): PlanAction[] {
  const out: PlanAction[] = DIRECTIONS.map((direction) => ({ kind: 'move' as const, direction }));
  if (!s.hasKey && samePoint(s.position, layout.key)) out.push({ kind: 'pick_up' });
  const toDoor = directionTo(s.position, layout.door);
  if (s.hasKey && !s.doorOpen && toDoor) out.push({ kind: 'unlock', direction: toDoor });
  return out;
}

export function outcomes(layout: Layout, s: WorldView, a: PlanAction): Outcome[] {
  switch (a.kind) {
    case 'move': {
      const [l, r] = perpendicular(a.direction);
      return [
        { p: 1 - layout.slip, next: moveTo(layout, s, a.direction) },
        { p: layout.slip / 2, next: moveTo(layout, s, l) },
        { p: layout.slip / 2, next: moveTo(layout, s, r) },
      ];
    }
    case 'pick_up':
      return [{ p: 1, next: { ...s, hasKey: true } }];
    case 'unlock':
      return [
        { p: layout.unlock, next: { ...s, doorOpen: true } },
        { p: 1 - layout.unlock, next: s },
      ];
  }
}

const index = (layout: Layout, s: WorldView) =>
  ((s.position.y * layout.width + s.position.x) * 2 + Number(s.hasKey)) * 2 + Number(s.doorOpen);

function terminalValue(layout: Layout, s: WorldView): number | undefined {
  if (samePoint(s.position, layout.goal)) return 1;
  if (cellAt(layout, s.position) === 'O') return 0;
  return undefined;
}

/** Every state of the layout (including unreachable ones; the grid is small). */
function allStates(layout: Layout): WorldView[] {
  const out: WorldView[] = [];
  for (let y = 0; y < layout.height; y++) {
    for (let x = 0; x < layout.width; x++) {
      const c = cellAt(layout, { x, y });
      if (c === '#') continue;
      for (const hasKey of [false, true])
        for (const doorOpen of [false, true]) out.push({ position: { x, y }, hasKey, doorOpen });
    }
  }
  return out;
}

/** The layout's MDP as flat tables: for each state, its actions, each with its outcomes. */
interface Model {
  states: WorldView[];
  terminal: Array<number | undefined>;
  /** actions[i][a] = [p0, next0, p1, next1, …] over state indices. */
  actions: number[][][];
  plans: PlanAction[][];
  indexOf: Map<number, number>;
}

const models = new WeakMap<Layout, Model>();
const valueTables = new WeakMap<Layout, Map<number, Float64Array[]>>();

function modelOf(layout: Layout): Model {
  let model = models.get(layout);
  if (model) return model;
  const states = allStates(layout);
  const indexOf = new Map(states.map((st, i) => [index(layout, st), i]));
  const plans = states.map((st) => actionsIn(layout, st));
  const actions = states.map((st, i) =>
    plans[i]!.map((a) => outcomes(layout, st, a).flatMap((o) => [o.p, indexOf.get(index(layout, o.next))!])),
  );
  model = { states, terminal: states.map((st) => terminalValue(layout, st)), actions, plans, indexOf };
  models.set(layout, model);
  return model;
}

function actionValue(outs: number[], v: Float64Array, discount: number): number {
  let sum = 0;
  for (let j = 0; j < outs.length; j += 2) sum += outs[j]! * v[outs[j + 1]!]!;
  return sum * discount;
}

/** V_0 … V_turns over the model's states: the (discounted) probability of reaching the goal with k turns left. */
function values(layout: Layout, turns: number, discount: number): Float64Array[] {
  const model = modelOf(layout);
  let byDiscount = valueTables.get(layout);
  if (!byDiscount) valueTables.set(layout, (byDiscount = new Map()));
  const table = byDiscount.get(discount) ?? [Float64Array.from(model.terminal, (t) => t ?? 0)];
  for (let k = table.length; k <= turns; k++) {
    const v = table[k - 1]!;
    const next = new Float64Array(model.states.length);
    for (let i = 0; i < model.states.length; i++) {
      const terminal = model.terminal[i];
      if (terminal !== undefined) {
        next[i] = terminal;
        continue;
      }
      let best = 0;
      for (const outs of model.actions[i]!) best = Math.max(best, actionValue(outs, v, discount));
      next[i] = best;
    }
    table.push(next);
  }
  byDiscount.set(discount, table);
  return table;
}

/** The best action with `turnsLeft` turns to go, and its value. Deterministic: ties go to the first action. */
export function plan(layout: Layout, s: WorldView, turnsLeft: number): { action: PlanAction; value: number } {
  const model = modelOf(layout);
  const v = values(layout, Math.max(0, turnsLeft - 1), DISCOUNT)[Math.max(0, turnsLeft - 1)]!;
  const i = model.indexOf.get(index(layout, s));
  if (i === undefined) throw new RangeError(`(${s.position.x}, ${s.position.y}) is not a cell of the layout`);
  let best: { action: PlanAction; value: number } | undefined;
  model.actions[i]!.forEach((outs, a) => {
    const value = actionValue(outs, v, DISCOUNT);
    if (!best || value > best.value + 1e-12) best = { action: model.plans[i]![a]!, value };
  });
  return best!;
}

/** The probability that optimal play reaches the goal within `turns` turns from the start (undiscounted). */
export function successProbability(layout: Layout, turns: number): number {
  const model = modelOf(layout);
  const start = model.indexOf.get(index(layout, { position: layout.start, hasKey: false, doorOpen: false }))!;
  return values(layout, turns, 1)[turns]![start]!;
}

/**
 * The way: the first move of the best route from s (the state card names it, a compass the dungeon
 * lends); undefined where the best action is not a move (pick up the key, unlock the door).
 */
export function wayFrom(layout: Layout, s: WorldView, turnsLeft: number): Direction | undefined {
  const { action } = plan(layout, s, turnsLeft);
  return action.kind === 'move' ? action.direction : undefined;
}
