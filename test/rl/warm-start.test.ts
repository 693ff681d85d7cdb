import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { defaultDemoPolicy } from '../../src/rl/warm-start.ts';
import { loadScenario } from '../../src/scenario/load.ts';

test("the warm start's demonstrator: noisy-expert where there is one, else the expert, else none", async (t) => {
  t.is(defaultDemoPolicy(await loadScenario('gridworld', builtinScenarios, { size: 'large' })), 'noisy-expert');
  // A scenario author's usual start: an expert alone (the files scenario has no noisy one).
  t.is(defaultDemoPolicy(await loadScenario('files', builtinScenarios)), 'expert');
  t.is(defaultDemoPolicy({ policies: {} }), undefined);
  // A policy named like a prototype member is not taken for one.
  t.is(defaultDemoPolicy({ policies: Object.create({ expert: () => null }) }), undefined);
});
