import { createRng, deriveSeed, type Json, type Message, type Task, type Policy } from 'agent-r1-ts';
import { DIRECTIONS, type Layout } from './layout.ts';
import { plan, type PlanAction, type WorldView } from './planner.ts';
import { turnsOf } from './tasks.ts';
import { layoutOf } from './world.ts';

const call = (name: string, args: { [key: string]: Json }) => ({
  text: `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`,
});

/** The world as the last observation (or the state card) describes it (the start, before any). */
export function currentView(task: Task, messages: readonly Message[]): WorldView {
  const layout = layoutOf(task);
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    const card = /^At (\d+), (\d+); key (carried|not carried); door (open|locked)\./.exec(m.content);
    if (card)
      return {
        position: { x: Number(card[1]), y: Number(card[2]) },
        hasKey: card[3] === 'carried',
        doorOpen: card[4] === 'open',
      };
    if (m.role !== 'tool') continue;
    for (const line of m.content.split('\n').reverse()) {
      const match = /^\[[a-z_]+\] (\{.*\})$/.exec(line);
      if (!match) continue;
      try {
        const data = JSON.parse(match[1]!);
        if (Array.isArray(data.position)) {
          return {
            position: { x: data.position[0], y: data.position[1] },
            hasKey: data.has_key === true,
            doorOpen: data.door_open === true,
          };
        }
      } catch {
        // not a state line
      }
    }
  }
  return { position: layout.start, hasKey: false, doorOpen: false };
}

function toCall(action: PlanAction) {
  switch (action.kind) {
    case 'move':
      return call('move', { direction: action.direction });
    case 'pick_up':
      return call('pick_up', {});
    case 'unlock':
      return call('unlock', { direction: action.direction });
  }
}

/** The layout as a planner that ignores pits sees it (pits as floor), made once per layout. */
const pitBlind = new WeakMap<Layout, Layout>();
function withoutPits(layout: Layout): Layout {
  let blind = pitBlind.get(layout);
  if (!blind) pitBlind.set(layout, (blind = { ...layout, rows: layout.rows.map((r) => r.replaceAll('O', '.')) }));
  return blind;
}

/** How often the noisy expert errs, per episode (each habit drawn on its own). */
export interface NoisyGridRates {
  /** Gives up when the stiff lock does not turn, instead of trying again. */
  quitWhenStuck: number;
  /** Plans as if pits were floor: it walks into one whenever its path crosses it. */
  ignorePits: number;
  /** Gives up at the locked door, key in hand, without trying to unlock it (answers early). */
  quitAtDoor: number;
}

export const DEFAULT_NOISY_GRID_RATES: Readonly<NoisyGridRates> = Object.freeze({
  quitWhenStuck: 0.5,
  ignorePits: 0.5,
  quitAtDoor: 0,
});

/** The noisy expert's habits for one episode: a pure function of (policy seed, episode id). */
export function noisyHabits(seed: number, episodeId: string, rates: NoisyGridRates) {
  const rng = createRng(deriveSeed('noisy-expert', seed, episodeId));
  // Drawn in this order, the third last: the first two habits of an episode are as they always were.
  return {
    quitWhenStuck: rng.next() < rates.quitWhenStuck,
    ignorePits: rng.next() < rates.ignorePits,
    quitAtDoor: rng.next() < rates.quitAtDoor,
  };
}

/**
 * The noisy expert errs the way a weak agent does, with habits drawn per episode (so records
 * replay): it may give up at a lock that sticks (the door then never opens), give up at the door
 * without trying the key, and plan as if pits were floor. Otherwise it is the expert.
 */
export function noisyExpert(seed: number, rates: NoisyGridRates = DEFAULT_NOISY_GRID_RATES): Policy {
  return {
    id: 'noisy-expert',
    // The version of a noisy expert without the newer habit is the one its records have always carried.
    version: `gridworld-noisy-expert-1:${rates.quitWhenStuck},${rates.ignorePits}${rates.quitAtDoor ? `,${rates.quitAtDoor}` : ''}`,
    act: async ({ task, messages, turn, episodeId }) => {
      const habits = noisyHabits(seed, episodeId, rates);
      const last = messages.at(-1)?.content ?? '';
      if (habits.quitWhenStuck && /the lock is stuck/.test(last))
        return { text: '<answer>The door will not open.</answer>' };
      const layout = layoutOf(task);
      const { action } = plan(
        habits.ignorePits ? withoutPits(layout) : layout,
        currentView(task, messages),
        turnsOf(layout) - turn,
      );
      if (habits.quitAtDoor && action.kind === 'unlock') return { text: '<answer>The door is locked.</answer>' };
      return toCall(action);
    },
  };
}

/** Plans with the world's probabilities (value iteration over the turns left) and re-plans every turn. */
export const expert: Policy = {
  id: 'expert',
  version: 'gridworld-expert-1',
  act: async ({ task, messages, turn }) => {
    const layout = layoutOf(task);
    const { action } = plan(layout, currentView(task, messages), turnsOf(layout) - turn);
    return toCall(action);
  },
};

/** Uniformly random tool calls, from the turn's sampler seed. */
export const random: Policy = {
  id: 'random',
  version: 'gridworld-random-1',
  act: async ({ seed }) => {
    const rng = createRng(seed);
    const r = rng.int(0, 9);
    if (r < 6) return call('move', { direction: rng.pick(DIRECTIONS) });
    if (r < 7) return call('pick_up', {});
    if (r < 9) return call('unlock', { direction: rng.pick(DIRECTIONS) });
    return call('look', {});
  },
};
