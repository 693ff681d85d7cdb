import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { builtinScenarios } from '../../scenarios/index.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { cli } from '../helpers/cli.ts';
import { spawnCli, spawnWorker, until, type WorkerProcess } from '../helpers/queue-worker.ts';
import { type RedisServer, startRedis } from '../helpers/redis.ts';

// Fault tests of the queue with real processes on a real Redis: a worker killed mid-job, the
// coordinator killed and resumed, Redis restarted mid-run and Redis gone for good.

const FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));
const tmp = () => mkdtempSync(join(tmpdir(), 'agent-r1-queue-faults-'));
const call = (name: string, args: object = {}) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
const EPISODES = 24;
// Episode i waits on (i mod 4) slow tool calls of 400 ms: a job's episodes end one after another.
const scripts = Array.from({ length: EPISODES }, (_, i) => [
  call('echo', { text: String(i) }),
  ...Array.from({ length: i % 4 }, () => call('hang')),
  '<answer>ok</answer>',
]);
const options = { scripts: JSON.stringify(scripts), hangMs: '400' };
const runArgs = [
  ...['--scenario', FAULTY, '--policy', 'script', '--episodes', String(EPISODES), '--seed', '3', '--max-turns', '6'],
  ...Object.entries(options).flatMap(([k, v]) => ['--option', `${k}=${v}`]),
];
const fast = ['--scenario', FAULTY, '--lock-duration', '1500', '--stalled-interval', '500'];

let expected: string | undefined;
/** The records of the same run on one machine (--workers 1), computed once. */
function localRecords(t: { is(a: unknown, b: unknown, m?: string): void }): string {
  if (expected === undefined) {
    const out = join(tmp(), 'local');
    const r = cli(['rollout', ...runArgs, '--workers', '1', '--out', out]);
    t.is(r.code, 0, r.stderr);
    expected = readFileSync(join(out, 'episodes.jsonl'), 'utf8');
  }
  return expected;
}

async function setUp(t: { teardown(fn: () => Promise<void>): void }, appendonly = false) {
  const redis = await startRedis({ appendonly });
  const workers: WorkerProcess[] = [];
  t.teardown(async () => {
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    await redis.dispose();
  });
  return { redis, workers };
}

/** Lines of the output so far. */
const linesIn = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').length - 1 : 0);

async function verify(t: { true(v: boolean, m?: string): void }, file: string) {
  const scenario = await loadScenario(FAULTY, builtinScenarios, options);
  const { records, corrupt } = await loadRecords(file);
  t.true(corrupt.length === 0);
  for (const record of records) t.true((await replayRecord(record, scenario)).verified, `episode ${record.index}`);
}

/** Keys a finished run must not leave behind (BullMQ's own fixed keys aside). */
async function leftovers(redis: RedisServer): Promise<string[]> {
  const client = new Redis(redis.url);
  const keys = await client.keys('agent-r1:*');
  client.disconnect();
  return keys.filter((k) => !/^agent-r1:rollouts:(events|id|meta|stalled-check|marker)$/.test(k));
}

/** Waits until a job of `worker` is in play with some of its episodes written and some not. */
async function midJob(url: string, worker: string): Promise<string> {
  const client = new Redis(url);
  const queue = new Queue('rollouts', { connection: client, prefix: 'agent-r1' });
  let found: string | undefined;
  try {
    await until(
      async () => {
        for (const job of await queue.getJobs(['active'])) {
          if (job.processedBy !== worker) continue;
          const items = job.data.items as { index: number }[];
          const done = await client.smismember(`agent-r1:run:${job.data.run}:done`, ...items.map((i) => i.index));
          const written = done.filter((x) => x === 1).length;
          if (written > 0 && written < done.length) {
            found = job.id;
            return true;
          }
        }
        return false;
      },
      120_000,
      `worker ${worker} in the middle of a job`,
    );
  } finally {
    await queue.close();
    client.disconnect();
  }
  return found!;
}

test.serial(
  'a worker SIGKILLed mid-job and one stopped mid-job: their jobs are taken over, every record is written once and replays',
  async (t) => {
    t.timeout(4 * 60_000);
    const { redis, workers } = await setUp(t);
    const wanted = localRecords(t);
    const [a, b] = [spawnWorker(redis.url, 'a', fast), spawnWorker(redis.url, 'b', [...fast, '--grace', '0'])];
    workers.push(a, b);
    const out = join(tmp(), 'run');
    const coordinator = spawnCli(['rollout', ...runArgs, '--queue', redis.url, '--chunk', '4', '--out', out, '--json']);
    // a dies in the middle of a job: the job stalls and is taken over.
    const killedIn = await midJob(redis.url, 'a');
    t.is(await a.stop('SIGKILL'), null);
    // b is stopped in the middle of a job, with no grace: the job goes back to the queue at once.
    const stoppedIn = await midJob(redis.url, 'b');
    t.is(await b.stop('SIGTERM'), 0);
    t.regex(b.log(), /SIGTERM: stopping \(1 in play[\s\S]*worker b \| stopped/);
    workers.push(spawnWorker(redis.url, 'c', fast));
    const r = await coordinator.done;
    t.is(r.code, 0, r.stderr);
    t.is(
      readFileSync(join(out, 'episodes.jsonl'), 'utf8'),
      wanted,
      `a killed in ${killedIn}, b stopped in ${stoppedIn}`,
    );
    const { queue } = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    t.is((queue.workers.a ?? 0) + queue.workers.b + queue.workers.c, EPISODES);
    t.true(queue.workers.c > 0);
    await verify(t, join(out, 'episodes.jsonl'));
    t.deepEqual(await leftovers(redis), []);
  },
);

test.serial(
  'the coordinator killed and started again with --resume continues from what was committed, replaying nothing',
  async (t) => {
    t.timeout(4 * 60_000);
    const { redis, workers } = await setUp(t);
    const wanted = localRecords(t);
    workers.push(spawnWorker(redis.url, 'a', fast));
    const out = join(tmp(), 'run');
    const args = ['rollout', ...runArgs, '--queue', redis.url, '--chunk', '4', '--out', out, '--json'];
    const first = spawnCli(args);
    await until(() => linesIn(join(out, 'episodes.jsonl')) >= 4, 120_000, 'four records');
    first.child.kill('SIGKILL');
    await first.done;
    t.true(linesIn(join(out, 'episodes.jsonl')) < EPISODES);
    // The worker goes on with the jobs in the queue meanwhile.
    await new Promise((r) => setTimeout(r, 1000));
    const second = spawnCli([...args, '--resume']);
    const r = await second.done;
    t.is(r.code, 0, r.stderr);
    t.is(readFileSync(join(out, 'episodes.jsonl'), 'utf8'), wanted);
    const { queue } = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    t.true(queue.resumed >= 4, JSON.stringify(queue));
    t.regex(r.stderr, /queue: \d+ episodes were committed before; \d+ to play in \d+ jobs/);
    // Nothing was played twice: no result arrived for an episode already committed.
    t.is(queue.duplicates, 0);
    t.is(queue.workers.a, EPISODES);
    t.deepEqual(await leftovers(redis), []);
  },
);

test.serial(
  'Redis restarted mid-run (AOF on): the run completes with every record; Redis gone for good: a clear error',
  async (t) => {
    t.timeout(4 * 60_000);
    const { redis, workers } = await setUp(t, true);
    const wanted = localRecords(t);
    workers.push(
      spawnWorker(redis.url, 'a', ['--scenario', FAULTY, '--lock-duration', '5000', '--stalled-interval', '1000']),
    );
    const out = join(tmp(), 'run');
    const args = ['rollout', ...runArgs, '--queue', redis.url, '--chunk', '4', '--out', out];
    const run = spawnCli(args);
    await until(() => linesIn(join(out, 'episodes.jsonl')) >= 4, 120_000, 'four records');
    await redis.stop();
    await new Promise((r) => setTimeout(r, 1500));
    await redis.restart();
    const r = await run.done;
    t.is(r.code, 0, r.stderr);
    t.regex(r.stderr, /queue: lost Redis \(.+\); waiting for it[\s\S]*queue: Redis is back/);
    t.is(readFileSync(join(out, 'episodes.jsonl'), 'utf8'), wanted);
    await verify(t, join(out, 'episodes.jsonl'));

    // Killed and not coming back: the coordinator stops after --queue-timeout, says so, exits 1.
    const out2 = join(tmp(), 'run');
    const again = spawnCli(['rollout', ...runArgs, '--queue', redis.url, '--out', out2, '--queue-timeout', '2']);
    await until(() => linesIn(join(out2, 'episodes.jsonl')) >= 1, 60_000, 'a record');
    await redis.kill();
    const lost = await again.done;
    t.is(lost.code, 1, lost.stderr);
    t.regex(lost.stderr, /error: lost the queue at redis:\/\/127\.0\.0\.1:\d+: .+ \(for \d+ s\)\n$/);
    t.regex(lost.stderr, /\d+ of 24 episodes were written; run it again with --resume to continue/);
  },
);
