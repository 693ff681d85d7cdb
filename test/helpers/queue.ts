import { Redis } from 'ioredis';
import { builtinScenarios } from '../../scenarios/index.ts';
import { QueueWorker, type QueueWorkerOptions } from '../../src/queue/queue-worker.ts';
import { loadRecordScenario, loadScenario } from '../../src/scenario/load.ts';
import { type RedisServer, startRedis } from './redis.ts';

// In-process helpers for the queue's library tests: a Redis, queue workers, what a run left behind.

export const load = (source: string, options: { [key: string]: string }) =>
  loadScenario(source, builtinScenarios, options);

/** A worker's scenario loader, as `agent-r1 worker --scenario DIR…` makes it: built-ins and `named` only. */
export const trusting =
  (named: string[] = []): QueueWorkerOptions['loadScenario'] =>
  (wanted) =>
    loadRecordScenario(wanted, builtinScenarios, named);

type Teardown = { teardown(fn: () => Promise<void>): void };

export async function server(t: Teardown): Promise<RedisServer> {
  const redis = await startRedis();
  t.teardown(() => redis.dispose());
  return redis;
}

/** Workers of the test's own, stopped when it ends. */
export async function workers(
  t: Teardown,
  url: string,
  names: string[],
  options: Partial<QueueWorkerOptions> = {},
): Promise<QueueWorker[]> {
  const started = await Promise.all(
    names.map((name) => QueueWorker.start({ url, name, threads: 1, loadScenario: trusting(), ...options })),
  );
  t.teardown(async () => {
    await Promise.all(started.map((w) => w.stop(1000)));
  });
  return started;
}

/** Every key in Redis but BullMQ's own fixed ones: what a finished run must not leave behind. */
export async function leftovers(url: string): Promise<string[]> {
  const client = new Redis(url);
  const keys = await client.keys('*');
  client.disconnect();
  return keys.filter((k) => !/^agent-r1:rollouts:(events|id|meta|stalled-check|marker)$/.test(k)).sort();
}
