import { availableParallelism } from 'node:os';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { EpisodeRecord, Json } from '../core/types.ts';
import { AgentR1Error } from '../core/errors.ts';
import type { BatchPolicy, Policy } from '../policy/policy.ts';
import { PolicyServer, type PolicyServerStats } from './policy-server.ts';
import type { RolloutTask, RolloutTaskResult, Trajectory, WorkerPolicySpec } from './protocol.ts';
import { planEpisodes, type EpisodePlanItem, type RolloutOptions } from './rollout.ts';
import { buildRecord, episodeConfig } from './run-episode.ts';
import { summarizeRecords, type RolloutSummary } from './summary.ts';
import { workerEntryUrl } from './worker-entry.ts';

export interface ParallelRolloutOptions extends RolloutOptions {
  /** Worker threads (default: the CPU count). */
  workers?: number;
  /** Most rows in one policy batch (model policies). */
  maxBatch?: number;
  /** How long the policy server waits to fill a batch (ms; default 'auto', see PolicyServerOptions). */
  maxWaitMs?: number | 'auto';
  /** How workers load the scenario: a built-in name or a folder (default: the scenario's id). */
  scenarioSource?: string;
  /** Episodes in flight inside each worker. */
  perWorkerConcurrency?: number;
  /** Crashes an episode may be caught in before it is rerun alone (where a crash makes it an error record). */
  maxAttempts?: number;
  /** Called with the number of finished episodes and generated tokens so far. */
  onProgress?: (progress: { done: number; tokens: number }) => void;
  /** A pool to run on (kept open afterwards); by default a new one, closed at the end. */
  pool?: Piscina;
}

export interface ThroughputSummary {
  wallMs: number;
  episodesPerSecond: number;
  envStepsPerSecond: number;
  tokensPerSecond: number;
  /** Share of wall time: policy compute (main thread), tool execution (per worker), everything else. */
  share: { policy: number; tools: number; other: number };
  workers: number;
  crashes: number;
}

export interface ParallelRolloutResult {
  records: EpisodeRecord[];
  /** Token-level trajectories (typed arrays) aligned with records; undefined for text-only policies. */
  trajectories: Array<Trajectory | undefined>;
  summary: RolloutSummary & { throughput: ThroughputSummary; policyServer?: PolicyServerStats };
}

/** The entry every worker thread loads (see worker-entry.ts); tasks pick their kind by export name. */
export const WORKER_URL = workerEntryUrl();

/**
 * A pool of rollout workers. parallelRollout makes one per call unless given one; a trainer that
 * rolls out every step keeps one, so workers (and the worlds and indexes they built) stay warm.
 */
export function createRolloutPool(workers: number, tasksPerWorker = 4): Piscina {
  const pool = new Piscina({
    filename: WORKER_URL,
    execArgv: [],
    minThreads: workers,
    maxThreads: workers,
    // Workers must hear the policy server between tasks (see DESIGN.md pitfalls).
    atomics: 'disabled',
    // Episodes are mostly waiting (on tools, on the policy server): a worker runs several tasks at
    // once, so a slow chunk does not hold back the ones queued behind it.
    concurrentTasksPerWorker: tasksPerWorker,
    idleTimeout: 60_000,
  });
  // Piscina 5.3 can raise a pool-level error when a task is aborted early; the task's own rejection reports it.
  pool.on('error', () => {});
  return pool;
}

/** Whether a policy can be used by workers (a reference policy by name, or a tokenizing batch policy). */
export function canRunInWorkers(policy: Policy, scenario: { policies: object }): boolean {
  try {
    workerPolicySpec(policy, Object.keys(scenario.policies));
    return true;
  } catch {
    return false;
  }
}

/** How a worker can rebuild the policy: by reference-policy name, or served remotely from here. */
export function workerPolicySpec(policy: Policy, scenarioPolicies: readonly string[]): WorkerPolicySpec {
  const tokenizer = (policy as { tokenizer?: { toJSON?: () => unknown } }).tokenizer;
  if ('actBatch' in policy && tokenizer?.toJSON) {
    return { kind: 'remote', id: policy.id, version: policy.version, tokenizer: tokenizer.toJSON() as Json };
  }
  if (scenarioPolicies.includes(policy.id)) return { kind: 'scripted', name: policy.id };
  throw new AgentR1Error(`policy ${policy.id} cannot run in workers: use a reference policy, a checkpoint policy, or workers 0`);
}

/**
 * Runs a rollout over Piscina worker threads. Workers run the episode machines; a model policy
 * stays on this thread behind a batching policy server. Records come back in episode order and are
 * byte-identical to a single-thread rollout of the same options, whatever the worker count. A worker
 * that dies loses nothing: its unfinished episodes are rerun from their seeds.
 */
export async function parallelRollout(options: ParallelRolloutOptions): Promise<ParallelRolloutResult> {
  const started = performance.now();
  const { runId, plan } = await planEpisodes(options);
  const workers = options.pool ? options.pool.options.maxThreads : Math.max(1, options.workers ?? availableParallelism());
  const spec = workerPolicySpec(options.policy, Object.keys(options.scenario.policies));
  const maxBatch = options.maxBatch ?? 32;
  const server = spec.kind === 'remote' ? new PolicyServer(options.policy as BatchPolicy, { maxBatch, maxWaitMs: options.maxWaitMs ?? 'auto' }) : undefined;
  const concurrency = options.perWorkerConcurrency ?? (spec.kind === 'remote' ? Math.max(1, Math.ceil(maxBatch / workers)) : 8);
  const chunkSize = spec.kind === 'remote' ? Math.ceil(plan.length / workers) : Math.max(1, Math.ceil(plan.length / (workers * 4)));
  const config = episodeConfig(options.scenario, options.config);
  const offset = plan[0]?.index ?? 0;
  const maxAttempts = options.maxAttempts ?? 3;

  const pool = options.pool ?? createRolloutPool(workers);
  const records: Array<EpisodeRecord | undefined> = new Array(plan.length);
  const trajectories: Array<Trajectory | undefined> = new Array(plan.length);
  let emitted = 0;
  let done = 0;
  let tokens = 0;
  let toolMs = 0;
  let crashes = 0;
  const attempts = new Map<number, number>();

  const accept = (record: EpisodeRecord, trajectory: Trajectory | undefined) => {
    const at = record.index - offset;
    if (records[at]) return;
    records[at] = record;
    trajectories[at] = trajectory;
    done++;
    tokens += record.turns.reduce((n, t) => n + (t.tokens?.length ?? 0), 0);
    while (emitted < plan.length && records[emitted]) {
      const next = records[emitted++]!;
      options.onRecord?.(next);
    }
    options.onProgress?.({ done, tokens });
  };

  // A crash fails every task in flight on that worker, not only the culprit's. An episode that has
  // been in too many crashes is rerun alone, one at a time, in a pool of its own: if it crashes
  // there, it is the culprit and is recorded as an error.
  let quarantine: Piscina | undefined;
  let quarantineQueue: Promise<void> = Promise.resolve();
  const isolate = (item: EpisodePlanItem) => {
    quarantineQueue = quarantineQueue.then(async () => {
      quarantine ??= createRolloutPool(1, 1);
      const ok = await runTask([item], quarantine);
      if (!ok.crashed || options.signal?.aborted) return;
      crashes++;
      if (!records[item.index - offset]) accept(crashedRecord(options, runId, config, item, ok.error), undefined);
    });
    return quarantineQueue;
  };

  const runTask = async (items: EpisodePlanItem[], on: Piscina): Promise<{ crashed: boolean; error?: unknown }> => {
    const { port1, port2 } = new MessageChannel();
    server?.attach(port1);
    const closed = new Promise<void>((resolve) => port1.once('close', () => resolve()));
    port1.on('message', (m: { type?: string; record?: EpisodeRecord; trajectory?: Trajectory }) => {
      if (m.type === 'record' && m.record) accept(m.record, m.trajectory);
    });
    const task: RolloutTask = {
      scenario: { source: options.scenarioSource ?? options.scenario.id, options: options.scenario.options },
      policy: spec,
      runId,
      config,
      items,
      concurrency,
      port: port2 as unknown as MessagePort,
    };
    try {
      const result = (await on.run(task, { transferList: [port2 as never], signal: options.signal })) as RolloutTaskResult;
      toolMs += result.toolMs;
      await closed;
      return { crashed: false };
    } catch (error) {
      return { crashed: true, error };
    } finally {
      port1.close();
    }
  };

  const runChunk = async (items: EpisodePlanItem[]): Promise<void> => {
    const outcome = await runTask(items, pool);
    if (!outcome.crashed || options.signal?.aborted) return;
    crashes++;
    const retry: EpisodePlanItem[] = [];
    const isolated: Promise<void>[] = [];
    for (const item of items.filter((i) => !records[i.index - offset])) {
      const n = (attempts.get(item.index) ?? 1) + 1;
      attempts.set(item.index, n);
      if (n > maxAttempts) isolated.push(isolate(item));
      else retry.push(item);
    }
    await Promise.all([retry.length > 0 ? runChunk(retry) : undefined, ...isolated]);
  };

  const chunks: EpisodePlanItem[][] = [];
  for (let i = 0; i < plan.length; i += chunkSize) chunks.push(plan.slice(i, i + chunkSize));
  try {
    await Promise.all(chunks.map(runChunk));
  } finally {
    server?.close();
    if (!options.pool) await pool.destroy();
    await quarantine?.destroy();
  }
  // Interrupted: hand on every finished record, even past a gap, so nothing finished is lost.
  for (let i = emitted; i < plan.length; i++) if (records[i]) options.onRecord?.(records[i]!);

  const finished = records.filter((r): r is EpisodeRecord => r !== undefined);
  const wallMs = performance.now() - started;
  const steps = finished.reduce((n, r) => n + r.turns.length, 0);
  const policyShare = server ? server.stats().computeMs / wallMs : 0;
  const toolShare = toolMs / (wallMs * workers);
  return {
    records: finished,
    trajectories: records.flatMap((r, i) => (r ? [trajectories[i]] : [])),
    summary: {
      ...summarizeRecords(finished, options.scenario),
      throughput: {
        wallMs,
        episodesPerSecond: (finished.length / wallMs) * 1000,
        envStepsPerSecond: (steps / wallMs) * 1000,
        tokensPerSecond: (tokens / wallMs) * 1000,
        share: { policy: policyShare, tools: toolShare, other: Math.max(0, 1 - policyShare - toolShare) },
        workers,
        crashes,
      },
      ...(server ? { policyServer: server.stats() } : {}),
    },
  };
}

/** The record of an episode whose worker kept crashing: an error, not a silent gap. */
function crashedRecord(options: RolloutOptions, runId: string, config: ReturnType<typeof episodeConfig>, item: EpisodePlanItem, err: unknown): EpisodeRecord {
  const message = `worker crashed on every attempt: ${err instanceof Error ? err.message : String(err)}`;
  return buildRecord(
    { scenario: options.scenario, task: item.task, policy: options.policy, seed: item.seed, group: item.task.id, runId },
    { episodeId: `${item.task.id}#${item.sample}`, index: item.index, sample: item.sample, config },
    { turns: [], answer: null, outcome: { reward: 0, success: false }, totalTokens: 0, endReason: 'error', error: message, prompt: [] },
  );
}
