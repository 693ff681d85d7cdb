import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { GPTModel, initBackend, saveCheckpoint, trainTokenizer } from '../../src/policy/tfjs/index.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/tfjs-policy.ts';
import { QueueRunError, QueueUnavailableError } from '../../src/queue/errors.ts';
import { QueueExecutor } from '../../src/queue/queue-executor.ts';
import { QueueWorker } from '../../src/queue/queue-worker.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { leftovers, load, server, trusting, workers } from '../helpers/queue.ts';
import { startRedis } from '../helpers/redis.ts';

const _FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
const _call = (name: string, args: object = {}) =>
  `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

test('scripted policy: the queue gives the local records, byte for byte, and cleans up after the run', async (t) => {
  const redis = await server(t);
  const scenario = await load('calculator', {});
  const policy = await scenario.policies.random!({ scenario, seed: 0 });
  const options = { scenario, policy, split: 'train', episodes: 40, seed: 11, group: 2 };
  const local = await rollout(options);
  await workers(t, redis.url, ['w1']);
  const executor = new QueueExecutor({ url: redis.url, chunkSize: 8 });
  try {
    const heard: number[] = [];
    const queued = await rollout({ ...options, executor, onRecord: (r) => heard.push(r.index) });
    t.is(bytes(queued.records), bytes(local.records));
    t.deepEqual(heard, [...Array(40).keys()]);
    t.deepEqual(executor.stats.workers, { w1: 40 });
    t.is(executor.stats.duplicates, 0);
    t.deepEqual(await leftovers(redis.url), []);
  } finally {
    await executor.close();
  }
});

test('a reference policy that draws from its seed is remade with that seed on the queue worker', async (t) => {
  const redis = await server(t);
  const scenario = await load('multihop-qa', {});
  const policy = await referencePolicy(scenario, 'noisy-expert', 7);
  const options = { scenario, policy, split: 'train', episodes: 24, seed: 5 };
  const local = await rollout(options);
  await workers(t, redis.url, ['w1']);
  const executor = new QueueExecutor({ url: redis.url, chunkSize: 8 });
  try {
    t.is(bytes((await rollout({ ...options, executor })).records), bytes(local.records));
  } finally {
    await executor.close();
  }
});

/** A small untrained checkpoint: random weights, a tokenizer trained on calculator text. */
async function tinyCheckpoint(scenario: Scenario): Promise<string> {
  await initBackend();
  const texts = (await scenario.tasks({ split: 'train', seed: 0, count: 50 })).flatMap((task) => [
    task.question,
    `<tool_call>{"name": "calculate", "arguments": {"expression": "${task.meta!.expression}"}}</tool_call>`,
  ]);
  const tokenizer = trainTokenizer(texts, { vocabSize: 400 });
  const model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 1, nHeads: 2, contextLength: 512, dMlp: 64 },
    5,
  );
  const dir = join(mkdtempSync(join(tmpdir(), 'agent-r1-ckpt-')), 'ckpt');
  await saveCheckpoint(dir, model, tokenizer, { sampling: { temperature: 1 } });
  return dir;
}

test('checkpoint policy: two workers, two jobs each at once, fetch it from the store and play the local records; the store is emptied', async (t) => {
  const redis = await server(t);
  const scenario = await load('calculator', {});
  const policy = await loadCheckpointPolicy(await tinyCheckpoint(scenario));
  const config = { maxTurns: 2, maxTokensPerTurn: 20, maxTotalTokens: 400 };
  const options = { scenario, policy, split: 'train', episodes: 12, seed: 4, group: 3, config };
  const local = await rollout(options);
  const cacheDir = mkdtempSync(join(tmpdir(), 'agent-r1-cache-'));
  // Two jobs at once on each worker: they share its threads' copy of the model.
  const started = await workers(t, redis.url, ['a', 'b'], { cacheDir, concurrency: 2 });
  const executor = new QueueExecutor({ url: redis.url, chunkSize: 3 });
  try {
    const queued = await rollout({ ...options, executor });
    t.is(bytes(queued.records), bytes(local.records));
    t.true(queued.records.every((r) => r.turns.every((turn) => turn.tokens && turn.logprobs)));
    t.is(
      Object.values(executor.stats.workers).reduce((a, b) => a + b, 0),
      12,
    );
    t.deepEqual(
      started.map((w) => w.status().jobsFailed),
      [0, 0],
    );
    t.deepEqual(await leftovers(redis.url), []);
  } finally {
    await executor.close();
  }
});

test('Redis unreachable: connecting fails at once with the address and the reason', async (t) => {
  const redis = await startRedis();
  const url = redis.url;
  await redis.dispose();
  const executor = new QueueExecutor({ url });
  const started = performance.now();
  const error = await t.throwsAsync(executor.connect(), { instanceOf: QueueUnavailableError });
  t.regex(error!.message, new RegExp(`^cannot reach the queue at ${url}: connect ECONNREFUSED`));
  t.true(performance.now() - started < 3000);
  await t.throwsAsync(QueueWorker.start({ url, loadScenario: trusting() }), { instanceOf: QueueUnavailableError });
  await executor.close();
});

test('a worker that cannot set up (no such scenario folder there) fails the run with its reason; no episode is blamed', async (t) => {
  const redis = await server(t);
  const scenario = await load('calculator', {});
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  await workers(t, redis.url, ['w']);
  const executor = new QueueExecutor({ url: redis.url, scenarioSource: '/nonexistent/scenario', checkEveryMs: 300 });
  try {
    const records: EpisodeRecord[] = [];
    const error = await t.throwsAsync(
      rollout({ scenario, policy, split: 'train', episodes: 4, seed: 1, executor, onRecord: (r) => records.push(r) }),
      { instanceOf: QueueRunError },
    );
    t.regex(
      error!.message,
      /^a worker \(w\) cannot play run [0-9a-f]+: worker cannot set up: scenario calculator was loaded from \/nonexistent\/scenario, which is not a folder/,
    );
    t.deepEqual(records, []);
  } finally {
    await executor.close();
  }
});

test('after a worker that cannot set up is replaced, --resume completes the run (the failed jobs are made again)', async (t) => {
  const redis = await server(t);
  const scenario = await load('calculator', {});
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const options = { scenario, policy, split: 'train', episodes: 6, seed: 3 };
  const local = await rollout(options);
  // A worker whose copy of the scenario is another version: every job fails its setup.
  const [stale] = await workers(t, redis.url, ['stale'], {
    loadScenario: async (wanted) => ({ ...(await trusting()(wanted)), version: 'another' }),
  });
  const first = new QueueExecutor({ url: redis.url, chunkSize: 2, checkEveryMs: 300 });
  try {
    await t.throwsAsync(rollout({ ...options, executor: first }), {
      instanceOf: QueueRunError,
      message: /cannot play run [0-9a-f]+: worker cannot set up: scenario .* the run has calculator/,
    });
  } finally {
    await first.close();
  }
  await stale!.stop(1000);
  await workers(t, redis.url, ['fresh']);
  const again = new QueueExecutor({ url: redis.url, chunkSize: 2, checkEveryMs: 300, resume: true });
  try {
    const resumed = await rollout({ ...options, executor: again });
    t.is(bytes(resumed.records), bytes(local.records));
    t.deepEqual(again.stats.workers, { fresh: 6 });
  } finally {
    await again.close();
  }
});
