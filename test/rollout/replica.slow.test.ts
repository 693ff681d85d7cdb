import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import type { TrainablePolicy } from '../../src/rl/trainable.ts';
import { sftWarmStart } from '../../src/rl/warm-start.ts';
import type { RolloutExecutor } from '../../src/rollout/executor.ts';
import { Replica } from '../../src/rollout/replica.ts';
import { rollout, type RolloutOptions, type RolloutResult } from '../../src/rollout/rollout.ts';
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
/** A rollout of the model's current weights, in this thread or on `executor`. */
const play = (
  options: Omit<RolloutOptions, 'policy'>,
  model: TrainablePolicy,
  temperature: number,
  executor?: RolloutExecutor,
): Promise<RolloutResult> => rollout({ ...options, policy: model.policy({ temperature }), executor });

test('a replicated rollout gives the in-thread records, greedy and sampled in groups, and follows new weights', async (t) => {
  t.timeout(5 * 60_000);
  const model = await trained;
  const backend = await initBackend();
  const replica = new Replica({ backend: backend.name });
  try {
    const greedy = { scenario, split: 'test', episodes: 9, seed: 5, concurrency: 8, config: episode };
    const here = await play(greedy, model, 0);
    const heard: number[] = [];
    const there = await play({ ...greedy, onRecord: (r) => heard.push(r.index) }, model, 0, replica);
    t.is(there.records.length, 9);
    t.deepEqual(heard, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    t.is(bytes(there.records), bytes(here.records));
    t.deepEqual(there.summary, here.summary);

    const tasks = await scenario.tasks({ split: 'train', seed: 2, count: 3 });
    const sampled = {
      scenario,
      split: 'train',
      episodes: 12,
      group: 4,
      tasks,
      indexOffset: 24,
      seed: 6,
      concurrency: 8,
      config: episode,
    };
    const a = await play(sampled, model, 1);
    const b = await play(sampled, model, 1, replica);
    t.is(bytes(b.records), bytes(a.records));
    t.deepEqual(
      b.records.map((r) => r.index),
      Array.from({ length: 12 }, (_, i) => 24 + i),
    );
    // Samples differ from one another (the comparison is not between empty or identical episodes).
    t.true(new Set(a.records.map((r) => JSON.stringify(r.turns.map((x) => x.text)))).size > 1);

    // New weights: the replica plays the new version, not the one it saved before.
    const v0 = model.version();
    const w = model.variables[0]!;
    w.assign(w.mul(1.5));
    await model.weightsChanged();
    t.not(model.version(), v0);
    const c = await play(greedy, model, 0);
    const d = await play(greedy, model, 0, replica);
    t.is(bytes(d.records), bytes(c.records));
    t.true(d.records.every((r) => r.policy.version === model.version()));
    // A rollout stopped before it starts plays nothing, as in-thread.
    const stopped = new AbortController();
    stopped.abort();
    t.deepEqual(
      (await play({ ...greedy, signal: stopped.signal }, model, 0, replica)).records,
      (await play({ ...greedy, signal: stopped.signal }, model, 0)).records,
    );
    t.is(replica.failures, 0);
  } finally {
    await replica.close();
  }
});

test('a replica that cannot start: its half is played on the main thread, same records, and the failure is reported', async (t) => {
  t.timeout(5 * 60_000);
  const model = await trained;
  const backend = await initBackend();
  const heard: string[] = [];
  const replica = new Replica({
    backend: backend.name,
    scenarioSource: 'no-such-scenario',
    onFallback: (e) => heard.push(e.message),
  });
  try {
    const options = { scenario, split: 'test', episodes: 6, seed: 5, concurrency: 8, config: episode };
    const here = await play(options, model, 0);
    const there = await play(options, model, 0, replica);
    t.is(bytes(there.records), bytes(here.records));
    t.is(replica.failures, 1);
    t.is(heard.length, 1);
    t.regex(heard[0]!, /unknown scenario "no-such-scenario"/);
  } finally {
    await replica.close();
  }
});
