import { availableParallelism } from 'node:os';
import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { UsageError } from '../../core/errors.ts';
import { QueueWorker, type WorkerStatus } from '../../queue/queue-worker.ts';
import { canUseReplica } from '../../rollout/replica.ts';
import { loadRecordScenario } from '../../scenario/load.ts';
import { collect, nonNegativeNumber, positiveInt } from '../common.ts';
import { queueUrl } from '../queue.ts';

interface WorkerFlags {
  queue: string;
  concurrency: number;
  threads: number;
  name?: string;
  backend: string;
  cache?: string;
  lockDuration: number;
  stalledInterval: number;
  grace: number;
  scenario: string[];
}

/** One status line: what the worker is doing and has done. */
export function statusLine(s: WorkerStatus, perSecond: number): string {
  const jobs = s.jobs.map((j) => `${j.id.slice(0, 8)}…${j.id.slice(j.id.lastIndexOf('-'))} ${j.done}/${j.total}`);
  return [
    `worker ${s.name}`,
    s.state === 'playing' ? `playing ${jobs.join(', ')}` : s.state,
    `${s.episodes} episodes (${perSecond.toFixed(1)}/s)`,
    `jobs ${s.jobsDone} done${s.jobsFailed ? `, ${s.jobsFailed} failed` : ''}`,
    ...(s.lastError ? [`last error: ${s.lastError}`] : []),
  ].join(' | ');
}

/**
 * Prints the status on stderr: one line rewritten in place on a terminal; otherwise a line when the
 * state or the jobs in play change, and every 10 s while playing.
 */
function statusPrinter(): (s: WorkerStatus) => void {
  const tty = process.stderr.isTTY;
  let lastLine = 0;
  let lastShape = '';
  let last: WorkerStatus | undefined;
  // Episodes per second over the last ~10 s.
  const samples: { at: number; episodes: number }[] = [];
  const print = (s: WorkerStatus, force: boolean) => {
    const now = performance.now();
    samples.push({ at: now, episodes: s.episodes });
    while (samples.length > 2 && now - samples[1]!.at > 10_000) samples.shift();
    const first = samples[0]!;
    const perSecond = now - first.at > 500 ? ((s.episodes - first.episodes) / (now - first.at)) * 1000 : 0;
    const shape = `${s.state}|${s.jobs.map((j) => j.id).join(',')}|${s.lastError ?? ''}`;
    const due = tty ? now - lastLine >= 200 : shape !== lastShape || now - lastLine >= 10_000;
    if (!force && !due) return;
    lastLine = now;
    lastShape = shape;
    const line = statusLine(s, perSecond);
    process.stderr.write(tty ? `\r\x1b[K${line.slice(0, process.stderr.columns ?? 200)}` : `${line}\n`);
  };
  setInterval(() => last && print(last, false), 1000).unref();
  return (s) => {
    last = s;
    print(s, s.state === 'draining' || s.state === 'stopped');
  };
}

export function register(program: Command): void {
  program
    .command('worker')
    .description('take rollout jobs from a queue (rollout, eval or train --queue) and play them on this machine')
    .requiredOption('--queue <url>', 'the queue: redis://HOST:PORT (the password: in the URL, or REDIS_PASSWORD)')
    .option(
      '--scenario <dir>',
      "a scenario folder this worker may play (besides the built-in ones); a job's own folder is never loaded (repeatable)",
      collect,
      [],
    )
    .option('--concurrency <n>', 'jobs played at once', positiveInt, 2)
    .option('--threads <n>', 'worker threads that play episodes', positiveInt, availableParallelism())
    .option('--name <name>', "this worker's name in jobs and the coordinator's counts (default: HOST-PID)")
    .option('--backend <name>', "tfjs backend of the threads' checkpoint copies: wasm or cpu", 'wasm')
    .option('--cache <dir>', 'where fetched checkpoints are kept (default: ~/.cache/agent-r1/checkpoints)')
    .option(
      '--lock-duration <ms>',
      "a job's lock, renewed every half of it; a dead worker's jobs are taken over after about this",
      positiveInt,
      30_000,
    )
    .option('--stalled-interval <ms>', 'how often to look for jobs of dead workers', positiveInt, 30_000)
    .option(
      '--grace <s>',
      'on SIGTERM or Ctrl-C, how long jobs in play may take to finish before they go back to the queue',
      nonNegativeNumber,
      30,
    )
    .action(async (flags: WorkerFlags) => {
      if (!canUseReplica(flags.backend)) {
        throw new UsageError(`--backend ${flags.backend}: worker threads load checkpoint copies on wasm or cpu only`);
      }
      const printStatus = statusPrinter();
      const worker = await QueueWorker.start({
        url: queueUrl(flags.queue),
        name: flags.name,
        concurrency: flags.concurrency,
        threads: flags.threads,
        backend: flags.backend,
        cacheDir: flags.cache,
        lockDurationMs: flags.lockDuration,
        stalledIntervalMs: flags.stalledInterval,
        loadScenario: (wanted) => loadRecordScenario(wanted, builtinScenarios, flags.scenario),
        onStatus: printStatus,
      });
      let signals = 0;
      await new Promise<void>((resolve) => {
        const onSignal = (signal: NodeJS.Signals) => {
          signals++;
          if (signals === 1) {
            process.exitCode = signal === 'SIGINT' ? 130 : 0;
            const playing = worker.status().jobs.length;
            const jobs = playing
              ? ` (${playing} in play: they finish within ${flags.grace} s, or go back to the queue; signal again to return them now)`
              : '';
            process.stderr.write(`\n${signal}: stopping${jobs}\n`);
            worker.stop(flags.grace * 1000).then(resolve, resolve);
          } else {
            worker.returnJobs();
          }
        };
        process.on('SIGTERM', onSignal);
        process.on('SIGINT', onSignal);
      });
      process.stderr.write('\n');
    });
}
