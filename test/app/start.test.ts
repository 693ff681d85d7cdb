import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { START_SCENARIO_OPTIONS, startBudget, startScenarioOptions } from '../../src/app/start.ts';
import { loadScenario } from '../../src/scenario/load.ts';

// The main job's world: the full job trains on chains of up to 3 hops (else no agent learns to search
// past two and every method ties on ood); the quick job's 3-turn episodes keep the 2-hop train split.

test('npm start trains on 2- and 3-hop questions; --quick on 2-hop ones; both evaluate on the same test and ood', async (t) => {
  const full = await loadScenario('multihop-qa', builtinScenarios, { seed: '1', ...startScenarioOptions(false) });
  const quick = await loadScenario('multihop-qa', builtinScenarios, { seed: '1', ...startScenarioOptions(true) });
  t.like(full.options, { ...START_SCENARIO_OPTIONS, trainHops: '3' });
  t.false('trainHops' in quick.options, 'the quick job keeps the default 2-hop train split');
  t.is(startBudget(true).episode?.maxTurns, 3);

  const train = await full.tasks({ split: 'train', seed: 0, count: 50 });
  t.true(
    train.some((task) => task.meta?.hops === 3),
    'one train task in five is a 3-hop chain',
  );
  const quickTrain = await quick.tasks({ split: 'train', seed: 0, count: 50 });
  t.false(quickTrain.some((task) => task.meta?.hops === 3));
  for (const split of ['test', 'ood'] as const) {
    t.deepEqual(
      await full.tasks({ split, seed: 5, count: 20 }),
      await quick.tasks({ split, seed: 5, count: 20 }),
      `${split}: the same tasks`,
    );
  }
});
