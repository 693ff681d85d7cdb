import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import cliProgress from 'cli-progress';
import { resolvePolicy, resolveUserPolicy } from '../../app/resolve-policy.ts';
import { rollout, type ThroughputSummary } from '../../rollout/rollout.ts';
import type { RolloutSummary } from '../../rollout/summary.ts';
import { RecordWriter } from '../../record/jsonl.ts';
import type { FinishedEpisode } from '../../rollout/finished-episode.ts';
import { OutputExistsError, UsageError } from '../../core/errors.ts';
import { writeOutput } from '../../core/write-output.ts';
import { assertWritableDir } from '../../core/writable-dir.ts';
import { contextSetting } from '../../env/context.ts';
import {
  budget,
  checkSplit,
  CONTEXT_HELP,
  contextMode,
  formatSummary,
  integer,
  keyValue,
  LOAD_DTYPE_HELP,
  loadDtype,
  nonNegativeInt,
  nonNegativeNumber,
  positiveInt,
  printJson,
  scenarioFromFlags,
} from '../common.ts';
import type { LoadDtype } from '../../hf/folder.ts';
import { canRunInWorkers, workerThreads } from '../../rollout/worker-threads.ts';
import { capWorkers, MAX_WORKERS } from '../../rollout/worker-count.ts';
import { availableParallelism } from 'node:os';
import { passAtK } from '../../rollout/pass-k.ts';
import {
  checkQueueFlags,
  type QueueFlags,
  queueFromFlags,
  queueOptions,
  queueSummary,
  workerCounts,
} from '../queue.ts';

export interface RolloutFlags extends QueueFlags {
  scenario: string;
  split: string;
  policy: string;
  episodes: number;
  seed: number;
  group: number;
  concurrency: number;
  workers: number;
  maxBatch: number;
  data?: string;
  option?: string[];
  maxTurns?: number;
  maxTokensPerTurn?: number;
  maxTotalTokens?: number;
  context?: string;
  temperature?: number;
  dtype?: LoadDtype;
  /** Who plays the scenario's user: one of its scripted users, or a model policy. */
  userPolicy?: string;
  out?: string;
  force?: boolean;
  json?: boolean;
  /** eval --pass-k K: each of --episodes tasks runs K times (derived seeds); the summary gains pass^k. */
  passK?: number;
}

function workerCount(value: string): number {
  const n = nonNegativeInt(value);
  if (n > MAX_WORKERS)
    throw new InvalidArgumentError(`expected at most ${MAX_WORKERS} (more are capped at the cores anyway)`);
  return n;
}

/** Refuses to overwrite the records of an earlier run (unless --force), and proves `out` writable up front. */
export function prepareOut(out: string, force: boolean | undefined): void {
  const found = ['episodes.jsonl', 'summary.json'].find((f) => existsSync(join(out, f)));
  if (found && !force) throw new OutputExistsError(out, found);
  assertWritableDir(out);
}

/** Options shared by `rollout` and `eval` (whose --scenario may be an --agent instead). */
export function rolloutOptions(
  command: Command,
  policyRequired: boolean,
  defaultSplit: string,
  scenarioRequired = true,
): Command {
  if (scenarioRequired) command.requiredOption('--scenario <name>', 'scenario name or folder');
  else command.option('--scenario <name>', 'scenario name or folder (or --agent)');
  command
    .option('--split <split>', 'task split', defaultSplit)
    .option('--episodes <n>', 'number of episodes', positiveInt, 100)
    .option('--seed <n>', 'run seed', integer, 0)
    .option('--group <g>', 'samples per task (GRPO groups)', positiveInt, 1)
    .option('--concurrency <n>', 'episodes in flight at once per worker (scripted policies)', positiveInt, 8)
    .option(
      '--workers <w>',
      'worker threads (0: run in this thread; capped at the episodes and the cores)',
      workerCount,
      availableParallelism(),
    )
    .option('--max-batch <b>', 'most episodes in one policy batch (model policies)', positiveInt, 32)
    .option('--data <path>', 'dataset file, for the dataset scenarios')
    .option('--option <key=value>', 'a scenario option (repeatable), e.g. --option size=large', keyValue, [])
    .option('--max-turns <n>', "turns per episode (default: the scenario's)", budget('maxTurns'))
    .option(
      '--max-tokens-per-turn <n>',
      "tokens one action may take (default: the scenario's)",
      budget('maxTokensPerTurn'),
    )
    .option(
      '--max-total-tokens <n>',
      "action + observation tokens per episode (default: the scenario's)",
      budget('maxTotalTokens'),
    )
    .option('--context <mode>', CONTEXT_HELP, contextMode)
    .option(
      '--temperature <x>',
      "a checkpoint policy's sampling temperature instead of the one it was saved with (0: greedy, as the paper table evaluates)",
      nonNegativeNumber,
    )
    .option('--dtype <d>', LOAD_DTYPE_HELP, loadDtype)
    .option(
      '--user-policy <spec>',
      "who plays the scenario's user (a conversation, e.g. helpdesk): one of its scripted users, or ckpt:DIR, hf:DIR, openai:MODEL@URL (default: the scenario's own; played in this thread)",
    )
    .option('--force', 'overwrite the records of an existing --out run directory')
    .option('--json', 'print the summary as JSON on the last stdout line');
  queueOptions(command, { resume: true });
  if (policyRequired) command.requiredOption('--policy <name>', 'reference policy name or ckpt:DIR');
  else command.option('--policy <name>', 'reference policy name or ckpt:DIR', 'expert');
  return command;
}

/** Runs a rollout with a progress bar on stderr; writes records to `out` when given. */
export async function runRolloutCommand(
  flags: RolloutFlags,
): Promise<RolloutSummary & { throughput: ThroughputSummary }> {
  // --resume continues the run in --out (the queue keeps what its workers committed).
  if (flags.out) prepareOut(flags.out, flags.force || flags.resume);
  const scenario = await scenarioFromFlags(flags);
  checkSplit(scenario, flags.split);
  const context = contextSetting(scenario, flags.context);
  const policy = await resolvePolicy(flags.policy, scenario, flags.seed, {
    temperature: flags.temperature,
    dtype: flags.dtype,
  });
  if (flags.policy.startsWith('ckpt:')) {
    const { backendInfo } = await import('../../policy/tfjs/backend.ts');
    const info = backendInfo();
    if (info) process.stderr.write(`backend: ${info.name} (${info.reason})\n`);
  }
  const userPolicy =
    flags.userPolicy === undefined ? undefined : await resolveUserPolicy(flags.userPolicy, scenario, flags.seed);
  if (userPolicy && flags.queue) throw new UsageError('--user-policy plays in this thread: not with --queue');
  await checkQueueFlags(flags, policy, scenario, flags.policy);
  // Connected before the output is opened: an unreachable queue leaves no file behind.
  const queue = flags.queue
    ? await queueFromFlags({ ...flags, queue: flags.queue }, (line) => process.stderr.write(`\n${line}\n`))
    : undefined;
  const writer = flags.out ? new RecordWriter(join(flags.out, 'episodes.jsonl')) : undefined;
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `episodes {bar} {value}/{total} | mean reward {reward} | {tps} tok/s | ETA {eta}s${queue ? ' | {workers}' : ''}`,
      hideCursor: false,
    },
    cliProgress.Presets.shades_classic,
  );
  const controller = new AbortController();
  const onSigint = () => controller.abort();
  process.once('SIGINT', onSigint);
  const started = performance.now();
  const K = flags.passK ?? 1;
  const episodes = flags.episodes * K;
  const group = flags.passK ?? flags.group;
  // Each task's runs: episode i is run i % K of task ⌊i / K⌋ (the plan's groups).
  const runs: boolean[][] = Array.from({ length: flags.passK ? flags.episodes : 0 }, () => Array(K).fill(false));
  let rewardSum = 0;
  let count = 0;
  let tokens = 0;
  bar.start(episodes, 0, { reward: '-', tps: '0', workers: 'no worker yet' });
  // Each episode's line is written as it came (from a worker thread: its bytes, never parsed here).
  const onEpisode = (episode: FinishedEpisode) => {
    writer?.writeLine(episode.line);
    if (flags.passK) runs[Math.floor(episode.digest.index / K)]![episode.digest.index % K] = episode.digest.success;
    rewardSum += episode.digest.totalReward;
    count++;
    tokens += episode.digest.tokens;
    const tps = (tokens / (performance.now() - started)) * 1000;
    bar.update(count, {
      reward: (rewardSum / count).toFixed(3),
      tps: tps.toFixed(0),
      ...(queue ? { workers: workerCounts(queue.stats) } : {}),
    });
  };
  const config = Object.fromEntries(
    Object.entries({
      maxTurns: flags.maxTurns,
      maxTokensPerTurn: flags.maxTokensPerTurn,
      maxTotalTokens: flags.maxTotalTokens,
      context,
    }).filter(([, v]) => v !== undefined),
  );
  const common = {
    config,
    scenario,
    policy,
    ...(userPolicy ? { userPolicy } : {}),
    split: flags.split,
    episodes,
    seed: flags.seed,
    group,
    signal: controller.signal,
    onEpisode,
  };
  // External (network) policies run in this thread: their time is waiting, not compute.
  const { workers, reason } = capWorkers(flags.workers, episodes);
  const inWorkers = !queue && !userPolicy && workers > 0 && canRunInWorkers(policy, scenario);
  if (inWorkers && reason)
    process.stderr.write(`workers: ${reason}
`);
  const executor =
    queue ??
    (inWorkers ? workerThreads({ workers, maxBatch: flags.maxBatch, scenarioSource: flags.scenario }) : undefined);
  try {
    const result = await rollout({
      ...common,
      // Each record is written as it comes: a run of any length needs no memory for them.
      keepRecords: false,
      executor,
      // A batch policy's concurrency follows from the batch size (see workerThreads).
      concurrency: (inWorkers || queue) && 'actBatch' in policy ? undefined : flags.concurrency,
    });
    const { throughput, batching } = result;
    const summary = {
      ...result.summary,
      throughput,
      ...(batching ? { batching } : {}),
      ...(queue ? { queue: queueSummary(queue.stats) } : {}),
      ...(flags.passK && !controller.signal.aborted ? passKSummary(runs) : {}),
    };
    if (controller.signal.aborted) {
      const resume = queue ? '; run it again with --resume to continue' : '';
      process.stderr.write(`\ninterrupted: ${count} finished episodes written${resume}\n`);
      process.exitCode = 130;
    } else if (queue && queue.stats.faults.length > 0) {
      process.stderr.write(
        `\n${queue.stats.faults.length} determinism faults: workers wrote different records for the same episode\n`,
      );
      process.exitCode = 1;
    }
    if (flags.out) {
      writeOutput(join(flags.out, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
    }
    return summary;
  } catch (err) {
    if (queue && !controller.signal.aborted) {
      process.stderr.write(`\n${count} of ${episodes} episodes were written; run it again with --resume to continue\n`);
    }
    throw err;
  } finally {
    bar.stop();
    await writer?.end();
    await executor?.close();
    process.off('SIGINT', onSigint);
  }
}

/** pass^k and pass@k for k = 1..K as a table, and why the figures are exact. */
function passKSummary(runs: boolean[][]) {
  const rows = passAtK(runs);
  return {
    passK: Object.fromEntries(rows.map((r) => [`k=${r.k}`, { 'pass^k': r.passHat, 'pass@k': r.passAt }])),
    passKNote: `${runs.length} tasks × ${rows.length} runs; exact: each run's seed derives from --seed, the task and the run, so the same command gives these figures again to the digit`,
  };
}

export function register(program: Command): void {
  rolloutOptions(
    program.command('rollout').description('run episodes and write DIR/episodes.jsonl and DIR/summary.json'),
    false,
    'train',
  )
    .option('--out <dir>', 'output directory')
    .action(async (flags: RolloutFlags) => {
      const name = [
        flags.scenario,
        flags.policy,
        flags.seed,
        ...(flags.temperature !== undefined ? [`t${flags.temperature}`] : []),
      ].join('-');
      const out = flags.out ?? join('runs', name.replace(/[^\w-]/g, '_'));
      const summary = await runRolloutCommand({ ...flags, out });
      const brief = {
        episodes: summary.episodes,
        meanReward: summary.meanReward,
        successRate: summary.successRate,
        failed: summary.failed,
        byEndReason: summary.byEndReason,
        throughput: summary.throughput,
        ...(summary.queue ? { queue: summary.queue } : {}),
      };
      if (flags.json) printJson({ ...brief, out });
      else process.stdout.write(`${formatSummary(brief)}\nrecords: ${join(out, 'episodes.jsonl')}\n`);
    });
}
