import test from 'ava';
import { rollout } from '../../src/rollout/rollout.ts';
import { call, scripted, toyScenario } from '../helpers/toy-scenario.ts';

test('64 episodes waiting on tools under one run signal: each episode listens on its own, no listener pile-up', async (t) => {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  try {
    // `hang` waits for its 50 ms timeout, so every episode's tool call is in flight at once.
    const { records } = await rollout({
      scenario: toyScenario(),
      policy: scripted([call('hang'), '<answer>42</answer>']),
      split: 'train',
      episodes: 64,
      seed: 3,
      concurrency: 64,
      signal: new AbortController().signal,
    });
    t.is(records.length, 64);
    t.true(records.every((r) => r.turns[0]!.results[0]!.error?.kind === 'timeout'));
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
  } finally {
    process.off('warning', onWarning);
  }
  t.deepEqual(
    warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')),
    [],
  );
});
