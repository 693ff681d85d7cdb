/**
 * Distributed rollouts benchmark (not a test): episodes/s on the job queue (BullMQ on a redis-server
 * of its own) with 1 and 2 `agent-r1 worker` processes, against the same run on local worker threads
 * (1 and 2 threads), on a CPU-bound scenario (multihop-qa, large world, expert policy); and the
 * queue's overhead per episode (the difference in seconds per episode between the queue with one
 * worker process of one thread and one local thread, and the coordinator's own CPU time per
 * episode). Every run's records are checked byte-identical. Prints a table; --json prints the
 * figures. Run without the `source` condition, the package resolves to its build (dist/): the
 * coordinator, the local threads and the worker processes run compiled JavaScript, as an installed
 * package does. Run: npm run build && npx tsx bench/distributed.ts [--episodes N] [--chunk N] [--json]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { builtinScenarios } from '../scenarios/index.ts';
import {
  type EpisodeRecord,
  loadScenario,
  type RolloutExecutor,
  rollout,
  serializeRecord,
  workerThreads,
} from 'agent-r1-ts';
import { QueueExecutor } from 'agent-r1-ts/queue';
import { startRedis } from '../test/helpers/redis.ts';

const flags = new Command()
  .option('--episodes <n>', 'episodes per timed run', (v) => Number(v), 512)
  .option('--chunk <n>', 'episodes per queue job', (v) => Number(v), 16)
  .option('--json', 'print the figures as JSON')
  .parse()
  .opts<{ episodes: number; chunk: number; json?: boolean }>();

const SOURCE = 'multihop-qa';
const OPTIONS = { size: 'large' };
const root = fileURLToPath(new URL('..', import.meta.url));
const scenario = await loadScenario(SOURCE, builtinScenarios, OPTIONS);
const policy = await scenario.policies.expert!({ scenario, seed: 0 });
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');

interface Timed {
  /** Steady state: from the first finished episode to the last (start-up excluded). */
  episodesPerSecond: number;
  wallSeconds: number;
  /** CPU time of this (coordinating) process per episode, ms. */
  coordinatorCpuMsPerEpisode: number;
  records: string;
}

async function timed(executor: RolloutExecutor, episodes: number, seed: number): Promise<Timed> {
  const stamps: number[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  const result = await rollout({
    scenario,
    policy,
    split: 'train',
    episodes,
    seed,
    executor,
    onProgress: () => stamps.push(performance.now()),
  });
  const used = process.cpuUsage(cpu);
  return {
    episodesPerSecond: ((stamps.length - 1) / (stamps.at(-1)! - stamps[0]!)) * 1000,
    wallSeconds: (performance.now() - started) / 1000,
    coordinatorCpuMsPerEpisode: (used.user + used.system) / 1000 / episodes,
    records: bytes(result.records),
  };
}

async function local(threads: number): Promise<Timed> {
  const executor = workerThreads({ workers: threads, scenarioSource: SOURCE });
  try {
    await timed(executor, 8 * threads, 99); // warm: each thread's world, index and search cache
    return await timed(executor, flags.episodes, 1);
  } finally {
    await executor.close();
  }
}

function startWorker(url: string, name: string): ChildProcess {
  const args = ['bin/agent-r1.js', 'worker', '--queue', url];
  return spawn(process.execPath, [...args, '--name', name, '--threads', '1', '--concurrency', '2'], {
    cwd: root,
    stdio: 'ignore',
  });
}

async function queued(url: string, processes: number): Promise<Timed> {
  const children = Array.from({ length: processes }, (_, i) => startWorker(url, `w${i + 1}`));
  const warm = new QueueExecutor({ url, chunkSize: 2, scenarioSource: SOURCE });
  const executor = new QueueExecutor({ url, chunkSize: flags.chunk, scenarioSource: SOURCE });
  try {
    // Warm: every worker has loaded the scenario in its thread (jobs small enough to reach each).
    await timed(warm, 16 * processes, 99);
    return await timed(executor, flags.episodes, 1);
  } finally {
    await warm.close();
    await executor.close();
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((resolve) => c.once('exit', resolve))));
  }
}

const redis = await startRedis();
try {
  const local1 = await local(1);
  const queue1 = await queued(redis.url, 1);
  const local2 = await local(2);
  const queue2 = await queued(redis.url, 2);
  for (const [name, run] of Object.entries({ queue1, local2, queue2 })) {
    if (run.records !== local1.records) throw new Error(`${name}: records differ from the local run's`);
  }
  const figures = {
    scenario: `${SOURCE} size=large, expert`,
    episodes: flags.episodes,
    chunk: flags.chunk,
    cpus: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    local: { threads1: local1.episodesPerSecond, threads2: local2.episodesPerSecond },
    queue: { workers1: queue1.episodesPerSecond, workers2: queue2.episodesPerSecond },
    scaling2over1: queue2.episodesPerSecond / queue1.episodesPerSecond,
    overhead: {
      wallMsPerEpisode: (1 / queue1.episodesPerSecond - 1 / local1.episodesPerSecond) * 1000,
      coordinatorCpuMsPerEpisode: queue1.coordinatorCpuMsPerEpisode,
    },
    byteIdentical: true,
  };
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(figures)}\n`);
  } else {
    const row = (what: string, threads: string, t: Timed) =>
      `${what.padEnd(34)}${threads.padStart(8)}${t.episodesPerSecond.toFixed(1).padStart(12)}${t.wallSeconds.toFixed(1).padStart(9)}`;
    const lines = [
      `${figures.scenario}: ${flags.episodes} episodes, ${flags.chunk} per job; ${figures.cpus} × ${figures.cpu}`,
      '',
      `${'run'.padEnd(34)}${'threads'.padStart(8)}${'episodes/s'.padStart(12)}${'wall s'.padStart(9)}`,
      row('local worker threads', '1', local1),
      row('queue, 1 worker process', '1', queue1),
      row('local worker threads', '2', local2),
      row('queue, 2 worker processes', '1 + 1', queue2),
      '',
      `2 worker processes / 1: ${figures.scaling2over1.toFixed(2)}×`,
      `queue overhead per episode: ${figures.overhead.wallMsPerEpisode.toFixed(2)} ms of wall time (queue, 1 worker vs 1 local thread); ` +
        `coordinator CPU ${figures.overhead.coordinatorCpuMsPerEpisode.toFixed(2)} ms`,
      'records: byte-identical in every run',
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
} finally {
  await redis.dispose();
}
