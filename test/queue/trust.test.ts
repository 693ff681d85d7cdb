import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { type Job, Queue, QueueEvents } from 'bullmq';
import { DEFAULT_EPISODE_CONFIG } from '../../src/core/types.ts';
import { queueUrl } from '../../src/cli/queue.ts';
import { connectRedis } from '../../src/queue/connection.ts';
import { QueueDatabaseError, QueueUnavailableError } from '../../src/queue/errors.ts';
import type { RolloutJobData } from '../../src/queue/job.ts';
import { QueueExecutor } from '../../src/queue/queue-executor.ts';
import { QueueWorker } from '../../src/queue/queue-worker.ts';
import { planEpisodes } from '../../src/rollout/plan.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { server, trusting, workers } from '../helpers/queue.ts';
import { until } from '../helpers/queue-worker.ts';
import { startRedis } from '../helpers/redis.ts';

// A queue job never decides what code runs: whoever can write to Redis can add jobs, so a worker
// plays only the built-in scenarios and the folders on its own command line, and only jobs whose
// budgets are within the CLI's bounds.

const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-queue-trust-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));
const evil = join(scratch, 'evil');
const marker = join(scratch, 'marker');
mkdirSync(evil);
writeFileSync(
  join(evil, 'index.ts'),
  `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\nexport default { id: 'calculator' };\n`,
);
const FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));

/** A job as a coordinator would make it (one calculator episode), with `change` applied. */
async function job(change: (data: RolloutJobData) => object): Promise<object> {
  const scenario = await loadScenario('calculator', builtinScenarios);
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { plan } = await planEpisodes({ scenario, policy, split: 'train', episodes: 1, seed: 0 });
  const data: RolloutJobData = {
    run: 'ab'.repeat(12),
    chunk: 0,
    scenario: { source: 'calculator', id: scenario.id, version: scenario.version, options: {} },
    policy: { kind: 'scripted', name: 'expert', seed: 0, id: 'expert', version: '1' },
    runId: 'injected',
    config: { ...DEFAULT_EPISODE_CONFIG },
    items: plan,
  };
  return change(data);
}

/** Adds a job by hand, as anyone with access to Redis can, and waits for it to fail; its reason. */
async function failedReason(url: string, data: object): Promise<string> {
  const queue = new Queue('rollouts', { connection: { url }, prefix: 'agent-r1' });
  const events = new QueueEvents('rollouts', { connection: { url }, prefix: 'agent-r1' });
  try {
    await events.waitUntilReady();
    const added: Job = await queue.add('rollout', data, { attempts: 1 });
    const reason = new Promise<string>((resolve) =>
      events.on('failed', ({ jobId, failedReason: why }) => jobId === added.id && resolve(why)),
    );
    const done = new Promise<string>((resolve) =>
      events.on('completed', ({ jobId }) => jobId === added.id && resolve('completed')),
    );
    return await Promise.race([reason, done]);
  } finally {
    await events.close();
    await queue.close();
  }
}

test('a job naming a folder the worker was not given fails with why; the folder is never imported', async (t) => {
  const redis = await server(t);
  const [worker] = await workers(t, redis.url, ['w']);
  const reason = await failedReason(redis.url, await job((d) => ({ ...d, scenario: { ...d.scenario, source: evil } })));
  t.regex(
    reason,
    new RegExp(
      `^worker cannot set up: scenario calculator comes from the folder ${evil}, which you have not named: .*--scenario ${evil}`,
    ),
  );
  t.false(existsSync(marker));
  t.deepEqual(worker!.status().jobs, []);
});

test('a job whose budgets are out of bounds fails at once and frees its slot', async (t) => {
  const redis = await server(t);
  const [worker] = await workers(t, redis.url, ['w'], { concurrency: 1 });
  const reason = await failedReason(
    redis.url,
    await job((d) => ({
      ...d,
      config: { maxTurns: 1e9, maxTokensPerTurn: -1, maxTotalTokens: 'x', toolTimeoutMs: 1e12 },
      concurrency: 1e9,
    })),
  );
  t.regex(reason, /^worker cannot set up: a malformed job \(/);
  for (const field of ['maxTurns', 'maxTokensPerTurn', 'maxTotalTokens', 'toolTimeoutMs', 'maxToolOutputChars'])
    t.regex(reason, new RegExp(`config\\.${field}: `), field);
  t.regex(reason, /concurrency: Too big/);
  t.regex(reason, /config\.maxTurns: Too big: expected number to be <=1000/);
  // The slot is free: a run's jobs are played.
  const scenario = await loadScenario('calculator', builtinScenarios);
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const executor = new QueueExecutor({ url: redis.url });
  try {
    const { records } = await rollout({ scenario, policy, split: 'train', episodes: 2, seed: 0, executor });
    t.is(records.length, 2);
  } finally {
    await executor.close();
  }
  // The records reach the coordinator before the worker has closed the job's books.
  await until(() => worker!.status().jobsDone === 1, 10_000, 'the worker to count the played job');
  t.like(worker!.status(), { jobsDone: 1, jobsFailed: 1, jobs: [] });
});

test('a worker plays the folders on its command line, found by path (the coordinator names it by its own)', async (t) => {
  const redis = await server(t);
  await workers(t, redis.url, ['w'], { loadScenario: trusting([FAULTY]) });
  const scenario = await loadScenario(FAULTY, builtinScenarios, { scripts: JSON.stringify([['<answer>ok</answer>']]) });
  const policy = await scenario.policies.script!({ scenario, seed: 0 });
  const executor = new QueueExecutor({ url: redis.url });
  try {
    const { records } = await rollout({ scenario, policy, split: 'train', episodes: 2, seed: 0, executor });
    t.deepEqual(
      records.map((r) => r.endReason),
      ['answered', 'answered'],
    );
  } finally {
    await executor.close();
  }
});

test('a database the server refuses fails at connect, for the worker and the coordinator', async (t) => {
  const redis = await server(t);
  const url = `${redis.url}/99`;
  const error = await t.throwsAsync(QueueWorker.start({ url, loadScenario: trusting() }), {
    instanceOf: QueueDatabaseError,
  });
  t.is(
    error!.message,
    `the queue at ${url} names database 99, which the Redis server refuses (ERR DB index is out of range)`,
  );
  const executor = new QueueExecutor({ url });
  await t.throwsAsync(executor.connect(), { instanceOf: QueueDatabaseError });
  await executor.close();
  // A database it has is used.
  const client = await connectRedis(`${redis.url}/3`);
  await client.set('k', 'v');
  t.is(await client.get('k'), 'v');
  await client.select(0);
  t.is(await client.get('k'), null);
  client.disconnect();
});

test('the password can come from REDIS_PASSWORD instead of the URL (visible in ps)', async (t) => {
  const redis = await startRedis({ password: 's3cret/:@' });
  t.teardown(() => redis.dispose());
  await t.throwsAsync(connectRedis(redis.url), { instanceOf: QueueUnavailableError, message: /NOAUTH/ });
  const url = queueUrl(redis.url, { REDIS_PASSWORD: 's3cret/:@' });
  t.is(url, `redis://:s3cret%2F%3A%40@127.0.0.1:${redis.port}`);
  const client = await connectRedis(url);
  t.is(await client.ping(), 'PONG');
  client.disconnect();
  // A password in the URL wins; without the variable the URL is as given.
  t.is(queueUrl('redis://:given@h:1', { REDIS_PASSWORD: 'x' }), 'redis://:given@h:1');
  t.is(queueUrl('redis://h:1', {}), 'redis://h:1');
});
