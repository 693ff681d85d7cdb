import test from 'ava';
import { createActor } from 'xstate';
import { createRng } from '../../src/core/rng.ts';
import type { Json, Task } from '../../src/core/types.ts';
import { parseRecordLine, serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { gridworld } from '../../scenarios/gridworld/index.ts';
import { GRID_REWARDS } from '../../scenarios/gridworld/env.ts';
import { cellAt, samePoint, type Layout } from '../../scenarios/gridworld/layout.ts';
import {
  outcomes,
  plan,
  successProbability,
  type PlanAction,
  type WorldView,
} from '../../scenarios/gridworld/planner.ts';
import { gridTasks, MAX_TURNS, MIN_SOLVABILITY } from '../../scenarios/gridworld/tasks.ts';
import { createGridState, view } from '../../scenarios/gridworld/world.ts';
import { gridMachine } from '../../scenarios/gridworld/world-machine.ts';

const scenario = gridworld;
const sink = () => {};

/** A hand-made dungeon: start (1,1), key (3,1), door (4,2), goal (6,2); a pit at (2,2). */
const handLayout: Layout = {
  width: 8,
  height: 5,
  rows: ['########', '#..K#..#', '#.O.D.G#', '#...#..#', '########'],
  start: { x: 1, y: 1 },
  key: { x: 3, y: 1 },
  door: { x: 4, y: 2 },
  goal: { x: 6, y: 2 },
  slip: 0.2,
  unlock: 0.7,
};
const handTask: Task = {
  id: 'hand',
  split: 'dev',
  question: 'escape',
  meta: { layout: handLayout as unknown as Json },
};

test('the world machine: walls and the locked door block, the key opens the door, pits and the exit end the game', (t) => {
  const world = createActor(gridMachine, { input: { layout: handLayout } }).start();
  const pos = () => world.getSnapshot().context.position;
  world.send({ type: 'MOVE', direction: 'north' });
  t.deepEqual(pos(), { x: 1, y: 1 }, 'a wall blocks');
  world.send({ type: 'PICK_UP' });
  t.true(world.getSnapshot().matches({ key: 'onFloor' }), 'no key on this cell');
  world.send({ type: 'MOVE', direction: 'east' });
  world.send({ type: 'MOVE', direction: 'east' });
  world.send({ type: 'UNLOCK', success: true });
  t.true(world.getSnapshot().matches({ door: 'locked' }), 'not next to the door, no key');
  world.send({ type: 'PICK_UP' });
  t.true(world.getSnapshot().matches({ key: 'carried' }));
  world.send({ type: 'MOVE', direction: 'south' });
  world.send({ type: 'MOVE', direction: 'east' });
  t.deepEqual(pos(), { x: 3, y: 2 }, 'the locked door blocks');
  world.send({ type: 'UNLOCK', success: false });
  t.true(world.getSnapshot().matches({ door: 'locked' }), 'a stuck lock stays locked');
  world.send({ type: 'UNLOCK', success: true });
  t.true(world.getSnapshot().matches({ door: 'unlocked' }));
  world.send({ type: 'MOVE', direction: 'east' });
  world.send({ type: 'MOVE', direction: 'east' });
  world.send({ type: 'MOVE', direction: 'east' });
  t.true(world.getSnapshot().matches({ agent: 'escaped' }));
  world.send({ type: 'MOVE', direction: 'west' });
  t.deepEqual(pos(), { x: 6, y: 2 }, 'no moves after the game ends');

  const faller = createActor(gridMachine, { input: { layout: handLayout } }).start();
  faller.send({ type: 'MOVE', direction: 'south' });
  faller.send({ type: 'MOVE', direction: 'east' });
  t.true(faller.getSnapshot().matches({ agent: 'fell' }));
});

test("moves slip with the layout's probability, drawn from the episode's world stream", async (t) => {
  const runner = new ToolRunner(scenario.tools, { timeoutMs: 1000, maxOutputChars: 4096 });
  let slips = 0;
  const n = 500;
  const rng = createRng(42);
  for (let i = 0; i < n; i++) {
    const state = createGridState(handTask);
    // From (1,3) moving east into open floor; a slip goes north or south (a wall), either way it counts.
    state.world.send({ type: 'MOVE', direction: 'south' });
    state.world.send({ type: 'MOVE', direction: 'south' });
    const r = await runner.run({ name: 'move', arguments: { direction: 'east' } }, { task: handTask, rng, state });
    if ((r.data as { slipped: boolean }).slipped) slips++;
    state.world.stop();
  }
  const rate = slips / n;
  t.true(Math.abs(rate - handLayout.slip) < 0.05, `slip rate ${rate}`);
});

test('bad tool arguments and impossible actions get clear errors', async (t) => {
  const runner = new ToolRunner(scenario.tools, { timeoutMs: 1000, maxOutputChars: 4096 });
  const state = createGridState(handTask);
  const ctx = { task: handTask, rng: createRng(1), state };
  const bad = await runner.run({ name: 'move', arguments: { direction: 'up' } }, ctx);
  t.is(bad.error?.kind, 'bad_arguments');
  t.regex(bad.content, /north|east|south|west/);
  t.like((await runner.run({ name: 'pick_up', arguments: {} }, ctx)).data as object, {
    error: 'there is no key on this cell',
  });
  t.like((await runner.run({ name: 'unlock', arguments: { direction: 'east' } }, ctx)).data as object, {
    error: 'there is no door to the east',
  });
  t.throws(() => createGridState({ id: 'x', split: 'dev', question: '' }), { message: /no valid meta.layout/ });
  t.throws(() => gridTasks('nope', 1, 1), { message: /no split "nope"/ });
  t.throws(() => gridTasks('dev', 1, 1.5), { message: /non-negative integer/ });
});

test('tasks are seeded, and every layout is escapable by optimal play', (t) => {
  const dev = gridTasks('dev', 1, 20);
  t.deepEqual(gridTasks('dev', 9, 20), dev, 'dev is a fixed set');
  t.notDeepEqual(gridTasks('train', 1, 5), gridTasks('train', 2, 5));
  t.deepEqual(gridTasks('train', 1, 5), gridTasks('train', 1, 5));
  for (const task of dev) t.true((task.meta!['solvability'] as number) >= MIN_SOLVABILITY);
});

/** Exact probability that a policy escapes within `turns` turns, by recursion over the layout's MDP. */
function escapeProbability(
  layout: Layout,
  choose: (s: WorldView, turnsLeft: number) => PlanAction,
  turns: number,
): number {
  const memo = new Map<string, number>();
  const go = (s: WorldView, k: number): number => {
    if (samePoint(s.position, layout.goal)) return 1;
    if (cellAt(layout, s.position) === 'O' || k === 0) return 0;
    const key = `${s.position.x},${s.position.y},${s.hasKey},${s.doorOpen},${k}`;
    let v = memo.get(key);
    if (v === undefined) {
      v = outcomes(layout, s, choose(s, k)).reduce((sum, o) => sum + o.p * go(o.next, k - 1), 0);
      memo.set(key, v);
    }
    return v;
  };
  return go({ position: layout.start, hasKey: false, doorOpen: false }, turns);
}

test('planning with the slip probabilities beats planning as if nothing slipped', (t) => {
  let expertTotal = 0;
  let naiveTotal = 0;
  let better = 0;
  for (const task of gridTasks('dev', 1, 12)) {
    const layout = task.meta!['layout'] as unknown as Layout;
    const blind = { ...layout, slip: 0, unlock: 1 };
    const expert = escapeProbability(layout, (s, k) => plan(layout, s, k).action, MAX_TURNS);
    const naive = escapeProbability(layout, (s, k) => plan(blind, s, k).action, MAX_TURNS);
    t.true(expert <= successProbability(layout, MAX_TURNS) + 1e-9, 'nothing beats the optimum');
    expertTotal += expert;
    naiveTotal += naive;
    if (expert > naive + 0.01) better++;
  }
  t.true(expertTotal > naiveTotal, `expert ${expertTotal / 12} vs naive ${naiveTotal / 12}`);
  t.true(better > 0);
  t.log(
    `mean escape probability within ${MAX_TURNS} turns: expert ${(expertTotal / 12).toFixed(4)}, slip-blind ${(naiveTotal / 12).toFixed(4)}`,
  );
  t.is(successProbability(handLayout, 3), 0, 'no way out in 3 turns');
  t.true(successProbability({ ...handLayout, slip: 0, unlock: 1 }, MAX_TURNS) === 1);
});

test('the expert escapes at least 90% of 100 dev dungeons; the random policy almost never', async (t) => {
  const expert = await scenario.policies['expert']!({ scenario, seed: 1 });
  const a = await rollout({ scenario, policy: expert, split: 'dev', episodes: 100, seed: 7, onRecord: sink });
  t.true(a.summary.successRate >= 0.9, `expert success ${a.summary.successRate}`);
  const random = await scenario.policies['random']!({ scenario, seed: 1 });
  const b = await rollout({ scenario, policy: random, split: 'dev', episodes: 100, seed: 7, onRecord: sink });
  t.true(b.summary.successRate < 0.1, `random success ${b.summary.successRate}`);
  t.log(`expert ${a.summary.successRate} (mean turns ${a.summary.meanTurns}); random ${b.summary.successRate}`);
  const keyTurn = a.records[0]!.turns.find((x) => x.info?.['key'] === true)!;
  t.is(keyTurn.reward, GRID_REWARDS.key, 'picking up the key is a process reward');
});

test("the world's transitions differ across seeds and replay exactly", async (t) => {
  const [task] = gridTasks('dev', 1, 1);
  const policy = await scenario.policies['expert']!({ scenario, seed: 1 });
  const records = await Promise.all([1, 2, 3, 4].map((seed) => runEpisode({ scenario, task: task!, policy, seed })));
  const paths = records.map((r) =>
    JSON.stringify(r.turns.map((x) => (x.results[0]?.data as { went?: string })?.went ?? null)),
  );
  t.true(new Set(paths).size > 1, 'different seeds, different slips');
  const again = await runEpisode({ scenario, task: task!, policy, seed: 1 });
  t.is(again.checksum, records[0]!.checksum, 'same seed, same episode');
  for (const original of records) {
    // Through the JSONL line format, as `agent-r1 replay FILE` reads it (canonical JSON: keys sorted).
    const record = parseRecordLine(serializeRecord(original));
    const result = await replayRecord(record, scenario);
    t.true(result.verified, JSON.stringify(result.divergence));
    const live = await replayRecord(record, scenario, { liveTools: true });
    t.true(live.verified, `live tools redraw the same slips: ${JSON.stringify(live.divergence)}`);
  }
  // A record whose slip was edited no longer replays: the world ends elsewhere.
  const tampered = structuredClone(records[0]!);
  const moveTurn = tampered.turns.find((x) => x.results[0]?.name === 'move')!;
  const effect = (moveTurn.results[0]!.data as any).effects[0];
  effect.event.direction = effect.event.direction === 'north' ? 'south' : 'north';
  t.false((await replayRecord(tampered, scenario)).verified);
});

test('a random episode that falls into a pit ends with done and no success', async (t) => {
  const random = await scenario.policies['random']!({ scenario, seed: 1 });
  const { records } = await rollout({ scenario, policy: random, split: 'dev', episodes: 30, seed: 3, onRecord: sink });
  const fell = records.find((r) => r.outcome.metrics?.['fell'] === 1);
  t.truthy(fell);
  t.is(fell!.endReason, 'done');
  t.false(fell!.outcome.success);
  t.true(fell!.turns.at(-1)!.info?.['fell'] === true);
  const state = createGridState(handTask);
  t.deepEqual(view(state).position, [1, 1]);
  state.world.stop();
});
