import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { checkScenario } from '../../src/app/check-scenario.ts';
import { FAMILIES } from '../../src/app/families.ts';
import { loadScenario } from '../../src/scenario/load.ts';

// The task families' slower check (the rest are in families.test.ts).

const load = (name: string, options: { [key: string]: string }) => loadScenario(name, builtinScenarios, options);

test('the harder calculator and the large gridworld keep scenario check green (determinism and replay)', async (t) => {
  for (const [name, options, config] of [
    ['calculator', { problems: 'multistep' }, {}],
    ['gridworld', { size: 'large' }, { context: 'card' }],
    ['gridworld', { size: 'large' }, {}],
    ['support-desk', FAMILIES['support-desk']!.options(false, 1), { context: 'card' }],
  ] as const) {
    const scenario = await load(name, options);
    const { problems, warnings } = await checkScenario(scenario, { episodesPerSplit: 1, config });
    t.deepEqual(problems, [], `${name} ${JSON.stringify(options)} ${JSON.stringify(config)}`);
    t.deepEqual(
      warnings.filter((w) => w.kind !== 'expert'),
      [],
    );
  }
});
