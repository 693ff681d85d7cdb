import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { serializeRecord } from '../../src/replay/record.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { rolloutInThread } from '../../src/rl/model-rollout.ts';
import { ReplicaRollouts } from '../../src/rl/replica.ts';
import { sftWarmStart } from '../../src/rl/warm-start.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { loadScenario } from '../../src/scenario/load.ts';

// The replica is a real Piscina thread with its own tfjs backend and a copy of the model loaded
// from a checkpoint: the records it plays must be the in-thread records, byte for byte.
const scenario = await loadScenario('calculator', builtinScenarios);
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
const trained = (async () => {
  await initBackend();
  const expert = await scenario.policies.expert!({ scenario, seed: 3 });
  const ws = await sftWarmStart({
    scenario,
    demoPolicy: expert,
    episodes: 48,
    seed: 3,
    steps: 20,
    batchSize: 8,
    lr: 1e-2,
    vocabSize: 300,
    model: { dModel: 32, nLayers: 1, nHeads: 2, contextLength: 512 },
  });
  return ws.trainable;
})();
const episode = { maxTurns: 3, maxTokensPerTurn: 48 };

test('a replicated rollout gives the in-thread records, greedy and sampled in groups, and follows new weights', async (t) => {
  t.timeout(5 * 60_000);
  const model = await trained;
  const backend = await initBackend();
  const replica = new ReplicaRollouts(scenario, backend.name);
  try {
    const greedy = { scenario, split: 'test', episodes: 9, seed: 5, concurrency: 8, config: episode };
    const here = await rolloutInThread(greedy, model, { temperature: 0 });
    const heard: number[] = [];
    const there = await replica.run({ ...greedy, onRecord: (r) => heard.push(r.index) }, model, { temperature: 0 });
    t.is(there.records.length, 9);
    t.deepEqual(heard, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    t.is(bytes(there.records), bytes(here.records));
    t.deepEqual(there.summary, here.summary);

    const tasks = await scenario.tasks({ split: 'train', seed: 2, count: 3 });
    const sampled = { scenario, split: 'train', episodes: 12, group: 4, tasks, indexOffset: 24, seed: 6, concurrency: 8, config: episode };
    const a = await rolloutInThread(sampled, model, { temperature: 1 });
    const b = await replica.run(sampled, model, { temperature: 1 });
    t.is(bytes(b.records), bytes(a.records));
    t.deepEqual(b.records.map((r) => r.index), Array.from({ length: 12 }, (_, i) => 24 + i));
    // Samples differ from one another (the comparison is not between empty or identical episodes).
    t.true(new Set(a.records.map((r) => JSON.stringify(r.turns.map((x) => x.text)))).size > 1);

    // New weights: the replica plays the new version, not the one it saved before.
    const v0 = model.version();
    const w = model.variables[0]!;
    w.assign(w.mul(1.5));
    model.weightsChanged();
    t.not(model.version(), v0);
    const c = await rolloutInThread(greedy, model, { temperature: 0 });
    const d = await replica.run(greedy, model, { temperature: 0 });
    t.is(bytes(d.records), bytes(c.records));
    t.true(d.records.every((r) => r.policy.version === model.version()));
    // A stopped rollout returns what was played before the stop, as in-thread (here: nothing).
    const stopped = new AbortController();
    stopped.abort();
    t.deepEqual((await replica.run({ ...greedy, signal: stopped.signal }, model, { temperature: 0 })).records, (await rolloutInThread({ ...greedy, signal: stopped.signal }, model, { temperature: 0 })).records);
    t.is(replica.failures, 0);
    t.true(replica.replicaSeconds > 0);
  } finally {
    await replica.close();
  }
});

test('a replica that cannot start: its half is played on the main thread, same records, and the failure is reported', async (t) => {
  t.timeout(5 * 60_000);
  const model = await trained;
  const backend = await initBackend();
  const heard: string[] = [];
  const replica = new ReplicaRollouts(scenario, backend.name, { scenarioSource: 'no-such-scenario', onFallback: (e) => heard.push(e.message) });
  try {
    const options = { scenario, split: 'test', episodes: 6, seed: 5, concurrency: 8, config: episode };
    const here = await rolloutInThread(options, model, { temperature: 0 });
    const there = await replica.run(options, model, { temperature: 0 });
    t.is(bytes(there.records), bytes(here.records));
    t.is(replica.failures, 1);
    t.is(heard.length, 1);
    t.regex(heard[0]!, /unknown scenario "no-such-scenario"/);
  } finally {
    await replica.close();
  }
});

test('a rollout range plays that share of the run: the shares concatenate to the whole run; a bad range is refused', async (t) => {
  const policy = await scenario.policies.random!({ scenario, seed: 1 });
  const options = { scenario, policy, split: 'train', episodes: 10, group: 2, seed: 4, indexOffset: 30 };
  const whole = await rollout(options);
  const first = await rollout({ ...options, range: { start: 0, end: 3 } });
  const rest = await rollout({ ...options, range: { start: 3, end: 10 } });
  t.is(bytes([...first.records, ...rest.records]), bytes(whole.records));
  t.is(rest.records[0]!.index, 33);
  for (const range of [{ start: 4, end: 2 }, { start: 0, end: 11 }, { start: -1, end: 2 }, { start: 0.5, end: 2 }]) {
    await t.throwsAsync(rollout({ ...options, range }), { instanceOf: RangeError, message: /not within the run's 10 episodes/ });
  }
});
