import { deriveSeed } from '../core/rng.ts';
import type { EpisodeRecord, Task } from '../core/types.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import type { AgentClient, AgentModule } from './agent-module.ts';
import type { EpisodeEnd } from './agent-record.ts';
import type { Gateway } from './gateway.ts';
import { EPISODE_HEADER } from '../openai/episode-gateway.ts';

export interface PlayAgentOptions {
  agent: AgentModule;
  /** The gateway the agent's client reaches (served by a ChatServer at `client.baseURL`). */
  gateway: Gateway;
  client: Omit<AgentClient, 'headers'>;
  tasks: readonly Task[];
  /** Runs of each task (a GRPO group). */
  group: number;
  seed: number;
  /** The first episode's index (a run's earlier steps come before). */
  indexOffset?: number;
  /** Agents running at once (default: all). */
  concurrency?: number;
  /** An agent that has not returned by then is written as failed; its later requests are refused. */
  timeoutMs: number;
  /** Put before each episode id (plays of the same indexes in one gateway: evals). */
  idPrefix?: string;
  /** Called with each record as its episode closes. */
  onRecord?: (record: EpisodeRecord) => void;
}

/** An episode id from its index and task: unique in a run, within the gateway's id alphabet. */
export function agentEpisodeId(index: number, task: Task, sample: number): string {
  return `${index}:${task.id.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 96)}#${sample}`;
}

/**
 * Runs the agent `group` times on each task, concurrently, each run its own episode of the gateway,
 * and returns the records in episode order. Whatever an agent does (returns, throws, hangs, returns
 * something that is not a reward) its episode gets a record; one agent's failure stops no other.
 */
export async function playAgent(options: PlayAgentOptions): Promise<EpisodeRecord[]> {
  const { gateway, group } = options;
  const offset = options.indexOffset ?? 0;
  const jobs = options.tasks.flatMap((task, k) =>
    Array.from({ length: group }, (_, sample) => {
      const index = offset + k * group + sample;
      return { task, sample, index, episodeId: (options.idPrefix ?? '') + agentEpisodeId(index, task, sample) };
    }),
  );
  const records = new Array<EpisodeRecord>(jobs.length);
  const one = async (job: (typeof jobs)[number], at: number) => {
    const written = gateway.openEpisode({
      episodeId: job.episodeId,
      index: job.index,
      task: job.task,
      group: job.task.id,
      sample: job.sample,
      seed: deriveSeed(options.seed, 'episode', job.index),
    });
    const end = await runAgent(options.agent, job.task, options.client, job.episodeId, options.timeoutMs);
    // An agent that posted its own reward closed its episode already: that record stands.
    if (gateway.isOpen(job.episodeId)) await gateway.end(job.episodeId, end);
    records[at] = await written;
    options.onRecord?.(records[at]!);
  };
  let next = 0;
  const workers = Array.from({ length: Math.min(options.concurrency ?? jobs.length, jobs.length) }, async () => {
    while (next < jobs.length) {
      const at = next++;
      await one(jobs[at]!, at);
    }
  });
  await Promise.all(workers);
  return records;
}

/**
 * One run of the agent on a task as an episode, to its end: its reward, or why it has none (it threw,
 * returned something else, or ran past the deadline, when its signal is aborted).
 */
export async function runAgent(
  agent: AgentModule,
  task: Task,
  settings: Omit<AgentClient, 'headers'>,
  episodeId: string,
  timeoutMs: number,
): Promise<EpisodeEnd> {
  const client: AgentClient = { ...settings, headers: { [EPISODE_HEADER]: episodeId } };
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<EpisodeEnd>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve({ error: `the agent did not finish within ${timeoutMs / 1000} s` });
    }, timeoutMs);
  });
  const run = (async (): Promise<EpisodeEnd> => {
    try {
      const result: unknown = await agent.run(task, client, { signal: controller.signal });
      return resultToEnd(result);
    } catch (err) {
      return { error: `the agent threw: ${err instanceof Error ? err.message : String(err)}` };
    }
  })();
  try {
    return await Promise.race([run, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** The agent's return value as an episode's end; anything but `{reward: finite number, …}` is an error. */
function resultToEnd(result: unknown): EpisodeEnd {
  const r = result as { reward?: unknown; success?: unknown; processRewards?: unknown } | null;
  const shown = (() => {
    try {
      return JSON.stringify(result)?.slice(0, 200) ?? String(result);
    } catch {
      return String(result);
    }
  })();
  const bad = (why: string): EpisodeEnd => ({ error: `the agent returned ${shown}: ${why}` });
  if (r === null || typeof r !== 'object') return bad('not an object { reward, success? }');
  if (typeof r.reward !== 'number' || !Number.isFinite(r.reward)) return bad('its reward is not a finite number');
  if (r.success !== undefined && typeof r.success !== 'boolean') return bad('its success is not a boolean');
  const process = r.processRewards;
  if (
    process !== undefined &&
    (!Array.isArray(process) || process.some((x) => typeof x !== 'number' || !Number.isFinite(x)))
  )
    return bad('its processRewards are not finite numbers');
  return {
    reward: r.reward,
    ...(r.success === undefined ? {} : { success: r.success as boolean }),
    ...(process ? { processRewards: process as number[] } : {}),
  };
}

/** What an agent's records come to, in the rollout summary's shape. */
export function summarizeAgentRecords(records: readonly EpisodeRecord[]): RolloutSummary {
  const n = records.length;
  const mean = (f: (r: EpisodeRecord) => number) => (n === 0 ? 0 : records.reduce((a, r) => a + f(r), 0) / n);
  const byEndReason: RolloutSummary['byEndReason'] = {};
  for (const r of records) byEndReason[r.endReason] = (byEndReason[r.endReason] ?? 0) + 1;
  return {
    episodes: n,
    successRate: mean((r) => (r.outcome.success ? 1 : 0)),
    meanReward: mean((r) => r.totalReward),
    meanTurns: mean((r) => r.turns.length),
    failed: records.filter((r) => r.status === 'error').length,
    byEndReason,
  };
}
