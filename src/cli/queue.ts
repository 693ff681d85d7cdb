import { type Command, Option } from 'commander';
import { UsageError } from '../core/errors.ts';
import type { Policy } from '../policy/policy.ts';
// Types only: BullMQ and ioredis load when --queue is given (they cost a third of a second of start-up).
import type { QueueEvent, QueueExecutor, QueueStats } from '../queue/queue-executor.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { nonNegativeNumber, positiveInt } from './common.ts';

/** The --queue flags of rollout, eval and train. */
export interface QueueFlags {
  queue?: string;
  chunk?: number;
  queueTimeout?: number;
  resume?: boolean;
}

/** The --queue options, as commander Options (train adds them to its chain one by one). */
export const queueFlagOptions = {
  queue: () =>
    new Option(
      '--queue <url>',
      'play the episodes on queue workers (agent-r1 worker) through Redis at redis://HOST:PORT',
    ),
  chunk: () => new Option('--chunk <n>', 'with --queue: episodes per job').argParser(positiveInt).default(16),
  timeout: () =>
    new Option('--queue-timeout <s>', 'with --queue: how long Redis may be unreachable during the run before it stops')
      .argParser(nonNegativeNumber)
      .default(60),
  resume: () =>
    new Option(
      '--resume',
      'with --queue: continue from what a stopped coordinator of the same run committed, without replaying it',
    ),
};

export function queueOptions(command: Command, options: { resume: boolean }): Command {
  command.addOption(queueFlagOptions.queue()).addOption(queueFlagOptions.chunk()).addOption(queueFlagOptions.timeout());
  if (options.resume) command.addOption(queueFlagOptions.resume());
  return command;
}

/** Rejects --queue flags that cannot work, before anything is connected or written. */
export async function checkQueueFlags(
  flags: QueueFlags,
  policy: Policy,
  scenario: Scenario,
  policySpec: string,
): Promise<void> {
  if (!flags.queue) {
    if (flags.resume) throw new UsageError('--resume continues a run on the queue: it needs --queue');
    return;
  }
  const { canRunOnQueue } = await import('../queue/queue-executor.ts');
  if (!canRunOnQueue(policy, scenario)) {
    throw new UsageError(
      `policy ${policySpec} cannot run on queue workers: use a reference policy of the scenario or ckpt:DIR`,
    );
  }
}

/**
 * The queue URL with the password from the environment variable REDIS_PASSWORD when the URL has
 * none: a password on the command line is visible to every user of the machine (`ps`), the
 * environment only to the process's own user.
 */
export function queueUrl(url: string, env: NodeJS.ProcessEnv = process.env): string {
  const password = env.REDIS_PASSWORD;
  if (!password) return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url; // the queue says what is wrong with it
  }
  if (parsed.password || !/^rediss?:$/.test(parsed.protocol)) return url;
  parsed.password = encodeURIComponent(password);
  return parsed.href;
}

/** What the coordinator tells about the queue, on its own line (above a progress bar). */
function describe(event: QueueEvent): string | undefined {
  switch (event.type) {
    case 'enqueued':
      return event.resumed > 0
        ? `queue: ${event.resumed} episodes were committed before; ${event.episodes} to play in ${event.jobs} jobs`
        : undefined;
    case 'requeued':
      return `queue: ${event.episodes} episodes queued again (${event.reason})`;
    case 'isolated':
      return `queue: job ${event.job} failed on every attempt (${event.reason}); its ${event.episodes} episodes are tried one by one`;
    case 'gave-up':
      return `queue: episode ${event.index} failed on every attempt (${event.reason}); recorded as an error`;
    case 'corrupt':
      return `queue: a corrupt result from worker ${event.worker} was dropped (${event.reason})`;
    case 'workers':
      return event.count === 0
        ? 'queue: no worker is connected; start one with agent-r1 worker --queue URL'
        : undefined;
    case 'redis-down':
      return `queue: lost Redis (${event.reason}); waiting for it`;
    case 'redis-back':
      return 'queue: Redis is back';
  }
}

/**
 * The coordinator for --queue, already connected: an unreachable Redis fails here, before any file
 * is opened. `log` hears determinism faults and queue events, one line each.
 */
export async function queueFromFlags(
  flags: QueueFlags & { queue: string },
  log: (line: string) => void,
): Promise<QueueExecutor> {
  const { QueueExecutor } = await import('../queue/queue-executor.ts');
  const executor = new QueueExecutor({
    url: queueUrl(flags.queue),
    chunkSize: flags.chunk,
    resume: flags.resume,
    waitForRedisMs: (flags.queueTimeout ?? 60) * 1000,
    onFault: (f) =>
      log(
        `determinism fault: episode ${f.index} (${f.episodeId}): workers ${f.committedBy} and ${f.duplicateBy} ` +
          `wrote different records; ${f.committedBy}'s is kept`,
      ),
    onEvent: (event) => {
      const line = describe(event);
      if (line) log(line);
    },
  });
  try {
    await executor.connect();
  } catch (err) {
    await executor.close();
    throw err;
  }
  return executor;
}

/** The queue's part of a summary: episodes per worker, duplicates dropped, faults, jobs made again. */
export function queueSummary(stats: QueueStats) {
  return {
    workers: Object.fromEntries(Object.entries(stats.workers).sort(([a], [b]) => a.localeCompare(b))),
    duplicates: stats.duplicates,
    determinismFaults: stats.faults.length,
    requeued: stats.requeued,
    resumed: stats.resumed,
    gaveUp: stats.gaveUp,
  };
}

/** Episodes per worker for a progress bar: `a 12, b 10`. */
export function workerCounts(stats: QueueStats): string {
  return Object.entries(stats.workers)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
}
