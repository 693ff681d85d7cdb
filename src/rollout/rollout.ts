import type { EpisodeRecord } from '../core/types.ts';
import type { BatchQueueStats } from './batch-queue.ts';
import type { ExecutorReport, RolloutExecutor } from './executor.ts';
import { FinishedEpisode } from './finished-episode.ts';
import { inThread } from './in-thread.ts';
import { planEpisodes, type PlanOptions } from './plan.ts';
import { episodeConfig } from '../episode/run-episode.ts';
import { rolloutSummarizer, type RolloutSummary } from './summary.ts';

export interface RolloutOptions extends PlanOptions {
  /** Where the episodes are played (default: in this thread; see inThread, workerThreads, Replica). */
  executor?: RolloutExecutor;
  /** Episodes in flight at once in each thread (default: the executor's). */
  concurrency?: number;
  /** Called with each finished record, in episode order. */
  onRecord?: (record: EpisodeRecord) => void;
  /**
   * Called with each finished episode, in episode order (before onRecord): its sealed line and its
   * digest, all a writer and a progress bar need. A record played in a worker thread is then never
   * parsed on this thread, unless onRecord, keepRecords or the scenario's summarizer asks for it.
   */
  onEpisode?: (episode: FinishedEpisode) => void;
  /**
   * Whether the result keeps the records (default true). With false, each record is let go once it
   * is handed to onRecord and summarized: a run of any length then needs memory only for the
   * records that arrived ahead of an unfinished one.
   */
  keepRecords?: boolean;
  /** Called with the number of finished episodes and generated tokens so far. */
  onProgress?: (progress: { done: number; tokens: number }) => void;
  /** Stops the rollout: no new episode starts; every finished one is kept. */
  signal?: AbortSignal;
}

export interface ThroughputSummary {
  wallMs: number;
  episodesPerSecond: number;
  envStepsPerSecond: number;
  tokensPerSecond: number;
  /** Share of wall time: policy compute (batch queue), tool execution (per thread), everything else. */
  share: { policy: number; tools: number; other: number };
  threads: number;
  crashes: number;
}

export interface RolloutResult {
  /** The finished records, in episode order (none with keepRecords: false). */
  records: EpisodeRecord[];
  /** What the records say (a function of the records alone, so as deterministic as they are). */
  summary: RolloutSummary;
  /** How fast they were played (timings: never part of a record or a metric that must reproduce). */
  throughput: ThroughputSummary;
  /** The batch queue's counters, where a batch policy was served through one. */
  batching?: BatchQueueStats;
}

/**
 * Plays a run's episodes and returns their records in episode order. The plan (tasks, seeds, run
 * id) is made here, the episodes are played by the executor, and the records are byte-identical
 * whichever executor plays them and however many threads it has. A record that arrives twice (a
 * rerun after a crash) is kept once. When stopped, every finished record is kept and handed on,
 * even past a gap.
 */
export async function rollout(options: RolloutOptions): Promise<RolloutResult> {
  const started = performance.now();
  const { runId, plan, draw } = await planEpisodes(options);
  const config = episodeConfig(options.scenario, options.config, options.policy);
  const executor = options.executor ?? inThread();
  const offset = plan[0]?.index ?? 0;
  const keep = options.keepRecords ?? true;
  const kept: EpisodeRecord[] = [];
  const summarizer = rolloutSummarizer(options.scenario);
  // Records that arrived ahead of an unfinished one wait here; `arrived` tells a rerun's duplicate.
  const waiting: Array<FinishedEpisode | undefined> = new Array(plan.length);
  const arrived = new Uint8Array(plan.length);
  let emitted = 0;
  let done = 0;
  let tokens = 0;
  let steps = 0;
  const handOn = (at: number) => {
    const episode = waiting[at]!;
    waiting[at] = undefined;
    options.onEpisode?.(episode);
    if (options.onRecord) options.onRecord(episode.record);
    summarizer.add(episode);
    steps += episode.digest.turns;
    if (keep) kept.push(episode.record);
  };
  const emit = (finished: EpisodeRecord | FinishedEpisode) => {
    const at = finished.index - offset;
    if (!(at >= 0 && at < plan.length) || arrived[at]) return;
    const episode =
      finished instanceof FinishedEpisode ? finished : FinishedEpisode.of(finished, summarizer.digest(finished));
    arrived[at] = 1;
    waiting[at] = episode;
    done++;
    tokens += episode.digest.tokens;
    while (emitted < plan.length && arrived[emitted]) handOn(emitted++);
    options.onProgress?.({ done, tokens });
  };
  const batch = {
    scenario: options.scenario,
    policy: options.policy,
    ...(options.userPolicy ? { userPolicy: options.userPolicy } : {}),
    runId,
    config,
    items: plan,
    ...(draw ? { draw } : {}),
    concurrency: options.concurrency,
  };
  let report: ExecutorReport;
  try {
    report = await executor.play(batch, emit, options.signal);
  } finally {
    if (!options.executor) await executor.close();
  }
  for (let i = emitted; i < plan.length; i++) if (arrived[i]) handOn(i);

  const wallMs = performance.now() - started;
  const policyShare = report.batching ? Math.min(1, report.batching.computeMs / wallMs) : 0;
  const toolShare = report.toolMs / (wallMs * report.threads);
  const throughput: ThroughputSummary = {
    wallMs,
    episodesPerSecond: (done / wallMs) * 1000,
    envStepsPerSecond: (steps / wallMs) * 1000,
    tokensPerSecond: (tokens / wallMs) * 1000,
    share: { policy: policyShare, tools: toolShare, other: Math.max(0, 1 - policyShare - toolShare) },
    threads: report.threads,
    crashes: report.crashes,
  };
  return {
    records: kept,
    summary: summarizer.result(),
    throughput,
    ...(report.batching ? { batching: report.batching } : {}),
  };
}
