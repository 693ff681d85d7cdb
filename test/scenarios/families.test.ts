import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { MULTISTEP_OPS, multistepTasks, type Step } from '../../scenarios/calculator/multistep.ts';
import { DEFAULT_NOISY_EARLY } from '../../scenarios/calculator/multistep-policies.ts';
import { noisyHabits } from '../../scenarios/gridworld/policies.ts';
import { gridTasks } from '../../scenarios/gridworld/tasks.ts';
import { deskNoisyMode } from '../../scenarios/support-desk/policies.ts';
import { ScenarioOptionsError } from '../../src/core/errors.ts';
import type { Layout } from '../../scenarios/gridworld/layout.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';

const load = (name: string, options: { [key: string]: string }) => loadScenario(name, builtinScenarios, options);

/** Whether `hits` of `n` trials fit a rate `p` (within four standard deviations). */
const fits = (hits: number, n: number, p: number) => Math.abs(hits / n - p) <= 4 * Math.sqrt((p * (1 - p)) / n);

test('multistep calculator: 2–4 operations in train, 3–4 in the harder test, 5–6 out of distribution; answers follow', (t) => {
  for (const split of ['train', 'dev', 'test', 'ood']) {
    const [lo, hi] = MULTISTEP_OPS[split]!;
    const tasks = multistepTasks(split, 3, 200);
    const counts = new Set<number>();
    for (const task of tasks) {
      const { start, steps } = task.meta as unknown as { start: number; steps: Step[] };
      counts.add(steps.length);
      let value = start;
      for (const { op, n } of steps) {
        value = op === '+' ? value + n : op === '-' ? value - n : op === '*' ? value * n : value / n;
        t.true(Number.isInteger(value) && value >= 1 && value <= 999, `${task.id}: ${value}`);
        t.true(task.question.includes(` ${n} `), `${task.id} names ${n}`);
      }
      t.is(task.answer, String(value));
    }
    t.deepEqual(
      [...counts].sort(),
      Array.from({ length: hi - lo + 1 }, (_, i) => lo + i),
    );
  }
  // dev, test and ood are fixed sets; train follows the seed.
  t.deepEqual(multistepTasks('test', 1, 5), multistepTasks('test', 2, 5));
  t.notDeepEqual(multistepTasks('train', 1, 5), multistepTasks('train', 2, 5));
});

test('the noisy experts err at their declared rates', async (t) => {
  const n = 2000;
  // calculator: the share of episodes answered before every operation was computed
  const calc = await load('calculator', { problems: 'multistep' });
  const { records } = await rollout({
    scenario: calc,
    policy: await calc.policies['noisy-expert']!({ scenario: calc, seed: 5 }),
    split: 'train',
    episodes: n,
    seed: 5,
  });
  const ops = (r: (typeof records)[number]) => (r.task.meta!.steps as unknown[]).length;
  const early = records.filter((r) => r.turns.length - 1 < ops(r)).length;
  t.true(fits(early, n, DEFAULT_NOISY_EARLY), `calculator: ${early} of ${n} early`);
  // one operation short, never more: it answers the intermediate result
  t.true(records.every((r) => r.turns.length - 1 >= ops(r) - 1));
  t.true(records.every((r) => r.status === 'ok'));
  // gridworld: each habit on its own
  const habits = Array.from({ length: n }, (_, i) =>
    noisyHabits(5, `ep-${i}`, { quitWhenStuck: 0.5, ignorePits: 0.3, quitAtDoor: 0.7 }),
  );
  t.true(fits(habits.filter((h) => h.quitWhenStuck).length, n, 0.5));
  t.true(fits(habits.filter((h) => h.ignorePits).length, n, 0.3));
  t.true(fits(habits.filter((h) => h.quitAtDoor).length, n, 0.7));
  // support desk: the share that errs, half each way
  const modes = Array.from({ length: n }, (_, i) => deskNoisyMode(5, `ep-${i}`, 0.7));
  t.true(fits(modes.filter((m) => m !== 'clean').length, n, 0.7));
  t.true(fits(modes.filter((m) => m === 'early').length, n, 0.35));
  // or only one way (noisyKind): the same episodes err, all of them that way
  const oneWay = Array.from({ length: n }, (_, i) => deskNoisyMode(5, `ep-${i}`, 0.7, 'no-identify'));
  t.deepEqual(
    oneWay.map((m) => m === 'clean'),
    modes.map((m) => m === 'clean'),
  );
  t.true(oneWay.every((m) => m === 'clean' || m === 'no-identify'));
});

test('the large dark gridworld: 15 × 9 dungeons (stacked 9 × 15 ones held out as ood), the map hidden', async (t) => {
  for (const split of ['train', 'test', 'ood']) {
    for (const task of gridTasks(split, 1, 10, 'large')) {
      const layout = task.meta!.layout as unknown as Layout;
      t.deepEqual([layout.width, layout.height], split === 'ood' ? [9, 15] : [15, 9]);
      t.is(layout.sight, 2);
      t.false(task.question.includes('#'), 'no map in the question');
      t.regex(task.question, /key at \(\d+, \d+\)/);
    }
  }
  const grid = await load('gridworld', { size: 'large' });
  const policy = await grid.policies.expert!({ scenario: grid, seed: 1 });
  const { records, summary } = await rollout({
    scenario: grid,
    policy,
    split: 'dev',
    episodes: 30,
    seed: 1,
    config: { context: 'card' },
  });
  t.true(summary.successRate >= 0.8, `expert ${summary.successRate}`);
  const turns = records.filter((r) => r.outcome.success).map((r) => r.turns.length);
  const meanTurns = turns.reduce((a, b) => a + b, 0) / turns.length;
  t.true(meanTurns >= 20 && meanTurns <= 40, `mean turns ${meanTurns}`);
  // The card's way (and the question's, before the first card) is the best route's next move:
  // the expert, which plans on the map the dark hides, moves that way at every step.
  const moveOf = (turn: (typeof records)[number]['turns'][number]) =>
    turn.action.kind === 'tool_calls' && turn.action.calls[0]!.name === 'move'
      ? String(turn.action.calls[0]!.arguments['direction'])
      : undefined;
  for (const r of records) {
    t.is(/; way (\w+)\)/.exec(r.task.question)?.[1], moveOf(r.turns[0]!) ?? 'pick_up', r.task.id);
    for (let i = 1; i < r.turns.length; i++) {
      const card = r.turns[i]!.context?.messages.at(-1)?.content ?? '';
      t.is(/; way (north|east|south|west)\./.exec(card)?.[1], moveOf(r.turns[i]!), `${r.task.id} turn ${i}: ${card}`);
    }
  }
  // look shows the cells within sight only: 5 lines of 5
  const look = records[0]!.turns.find((x) => x.results[0]?.name === 'look');
  if (look) t.is((look.results[0]!.data as { map: string }).map.split('\n').length, 5);
});

test('scenario options: unknown names and bad values are refused, and a plain scenario takes none', async (t) => {
  for (const [name, options, message] of [
    ['calculator', { problems: 'hard' }, /problems must be basic or multistep/],
    ['calculator', { steps: '3' }, /unknown option steps/],
    ['calculator', { problems: 'multistep', noisyEarly: '1.5' }, /noisyEarly must be in \[0, 1\]/],
    ['calculator', { noisyEarly: '0.5' }, /noisyEarly needs problems=multistep/],
    ['gridworld', { size: 'huge' }, /size must be small or large/],
    ['gridworld', { size: 'large', noisyPits: 'x' }, /noisyPits must be in \[0, 1\]/],
    ['gridworld', { noisyDoor: '0.5' }, /the noisy expert needs size=large/],
    ['gridworld', { size: 'large', noisyDoor: '2' }, /noisyDoor must be in \[0, 1\]/],
    ['support-desk', { prompt: 'tiny' }, /prompt must be full, compact or terse/],
    ['support-desk', { noisyKind: 'late' }, /noisyKind must be both, no-identify, early/],
    ['helpdesk', { noisyRate: '1.5' }, /noisyRate must be in \[0, 1\]/],
    ['helpdesk', { persona: 'rude' }, /unknown option persona; valid: noisyRate/],
  ] as const) {
    const err = await t.throwsAsync(load(name, options), { instanceOf: ScenarioOptionsError });
    t.regex(err!.message, message);
  }
  const plain = { default: { id: 'plain', version: '1' } };
  const err = await t.throwsAsync(loadScenario('plain', { plain: async () => plain as never }, { size: 'large' }), {
    instanceOf: ScenarioOptionsError,
  });
  t.regex(err!.message, /scenario plain takes no options \(got size\)/);
});

test('the large gridworld noisy expert with noisyDoor=1 gives up at the locked door, key in hand, and never unlocks', async (t) => {
  const grid = await load('gridworld', { size: 'large', noisyStuck: '0', noisyPits: '0', noisyDoor: '1' });
  const policy = await grid.policies['noisy-expert']!({ scenario: grid, seed: 1 });
  const { records } = await rollout({
    scenario: grid,
    policy,
    split: 'dev',
    episodes: 12,
    seed: 1,
    config: { context: 'card' },
  });
  t.true(records.every((r) => !r.outcome.success));
  t.true(records.every((r) => r.turns.every((x) => !x.text.includes('"unlock"'))));
  const quit = records.filter((r) => r.answer === 'The door is locked.');
  t.true(quit.length >= 8, `${quit.length} of 12 reach the door`);
  t.true(quit.every((r) => r.outcome.metrics?.['key'] === 1 && r.outcome.metrics?.['door'] === 0));
});
