import test from 'ava';
import type { Task } from '../../src/core/types.ts';
import { episodesCoveringTypes } from '../../src/app/check-determinism.ts';
import { cli } from '../helpers/cli.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';

// scenario check plays enough of each split's tasks to meet every task type among its first 64:
// two per split once missed a scenario's third kind of task.

const scenarioOf = (types: (string | undefined)[]) =>
  ({
    tasks: ({ split, count }: { split: string; count: number }): Task[] =>
      types.slice(0, count).map((type, i) => ({ id: `${split}-${i}`, split, question: '', ...(type ? { type } : {}) })),
  }) as unknown as Scenario;

test('episodes per split: at least the asked number, and until every type has come', async (t) => {
  const late = scenarioOf(['a', 'a', 'b', 'a', 'a', 'c', 'a']);
  t.deepEqual(await episodesCoveringTypes(late, 'train', { seed: 0 }), { episodes: 6, types: ['a', 'b', 'c'] });
  t.deepEqual(await episodesCoveringTypes(late, 'train', { seed: 0, episodesPerSplit: 8 }), {
    episodes: 8,
    types: ['a', 'b', 'c'],
  });
  t.deepEqual(await episodesCoveringTypes(scenarioOf([undefined, undefined, undefined]), 'train', { seed: 0 }), {
    episodes: 2,
    types: [],
  });
  // A type first met past the 64th task is not looked for.
  const far = scenarioOf([...Array(64).fill('a'), 'z']);
  t.deepEqual(await episodesCoveringTypes(far, 'train', { seed: 0 }), { episodes: 2, types: ['a'] });
});

test.serial(
  'scenario check --context plays the episodes under that mode: a card where the scenario has one, a problem where not',
  (t) => {
    const grid = cli(['scenario', 'check', 'scenarios/gridworld', '--context', 'card', '--json']);
    t.is(grid.code, 0, grid.stdout + grid.stderr);
    t.true(grid.lastJson().ok);
    const calc = cli(['scenario', 'check', 'scenarios/calculator', '--context', 'card', '--json']);
    t.is(calc.code, 2);
    t.regex(JSON.stringify(calc.lastJson().problems), /scenario calculator has no state card/);
  },
);
