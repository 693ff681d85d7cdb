import { createHash } from 'node:crypto';
import type { EpisodeConfig, EpisodeRecord, Task } from '../core/types.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { createToolCache } from '../tools/runner.ts';
import { episodeConfig, episodeSeed, runEpisode } from './run-episode.ts';
import { summarizeRecords, type RolloutSummary } from './summary.ts';

export interface RolloutOptions {
  scenario: Scenario;
  policy: Policy;
  split: string;
  /** Total episodes (tasks × group). */
  episodes: number;
  seed: number;
  /** Samples per task (GRPO groups). */
  group?: number;
  /** Episodes in flight at once in this thread. */
  concurrency?: number;
  config?: Partial<EpisodeConfig>;
  /** Called with each finished record, in episode order. */
  onRecord?: (record: EpisodeRecord) => void;
  signal?: AbortSignal;
  /** Overrides the task list (e.g. a trainer's batch); otherwise scenario.tasks(split, seed). */
  tasks?: Task[];
  /** Offset added to episode indices (a trainer's step). */
  indexOffset?: number;
  /**
   * Run only the plan's episodes [start, end): a share of the run, for splitting one run across
   * threads. Their records are exactly those the whole run would give them (same run id, seeds).
   */
  range?: { start: number; end: number };
}

export interface EpisodePlanItem {
  index: number;
  task: Task;
  sample: number;
  seed: number;
}

/** Which task and seed every episode of a run gets. Depends only on the options, never on timing. */
export async function planEpisodes(options: RolloutOptions): Promise<{ runId: string; plan: EpisodePlanItem[] }> {
  const group = Math.max(1, options.group ?? 1);
  const taskCount = Math.ceil(options.episodes / group);
  const tasks = options.tasks ?? (await options.scenario.tasks({ split: options.split, seed: options.seed, count: taskCount }));
  if (tasks.length === 0) throw new RangeError(`scenario ${options.scenario.id} has no tasks in split "${options.split}"`);
  const plan: EpisodePlanItem[] = [];
  for (let i = 0; i < options.episodes; i++) {
    // A scenario with fewer tasks than asked for cycles through them, with new sample indices.
    const slot = Math.floor(i / group);
    const task = tasks[slot % tasks.length]!;
    const sample = (i % group) + group * Math.floor(slot / tasks.length);
    plan.push({ index: (options.indexOffset ?? 0) + i, task, sample, seed: episodeSeed(options.seed, task.id, sample) });
  }
  const range = options.range;
  if (range && !(Number.isInteger(range.start) && Number.isInteger(range.end) && 0 <= range.start && range.start <= range.end && range.end <= plan.length)) {
    throw new RangeError(`range [${range.start}, ${range.end}) is not within the run's ${plan.length} episodes`);
  }
  return { runId: runIdOf(options), plan: range ? plan.slice(range.start, range.end) : plan };
}

/** A run id derived from what determines the run, so equal runs have equal ids (and equal bytes). */
export function runIdOf(options: RolloutOptions): string {
  const key = canonicalJson({
    scenario: [options.scenario.id, options.scenario.version, options.scenario.options],
    policy: [options.policy.id, options.policy.version],
    split: options.split,
    episodes: options.episodes,
    seed: options.seed,
    group: options.group ?? 1,
    config: episodeConfig(options.scenario, options.config),
  });
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/**
 * Runs a batch of episodes in this thread, several in flight at once, and returns the records in
 * episode order. (The parallel version over worker threads has the same contract.)
 */
export async function rollout(options: RolloutOptions): Promise<{ records: EpisodeRecord[]; summary: RolloutSummary }> {
  const { runId, plan } = await planEpisodes(options);
  const config = episodeConfig(options.scenario, options.config);
  const offset = plan[0]?.index ?? 0;
  const toolCache = createToolCache();
  const records: EpisodeRecord[] = new Array(plan.length);
  const ready: boolean[] = new Array(plan.length).fill(false);
  let emitted = 0;
  let next = 0;
  const worker = async () => {
    while (next < plan.length && !options.signal?.aborted) {
      // Scripted episodes can run entirely on microtasks; yield so signals and I/O get a turn.
      await new Promise((resolve) => setImmediate(resolve));
      if (options.signal?.aborted || next >= plan.length) break;
      const item = plan[next++]!;
      const record = await runEpisode({
        scenario: options.scenario,
        task: item.task,
        policy: options.policy,
        seed: item.seed,
        index: item.index,
        sample: item.sample,
        group: item.task.id,
        runId,
        config,
        toolCache,
        signal: options.signal,
      });
      const at = item.index - offset;
      records[at] = record;
      ready[at] = true;
      // Hand records on in episode order, whatever order they finish in.
      while (emitted < plan.length && ready[emitted]) {
        const record = records[emitted++]!;
        options.onRecord?.(record);
      }
    }
  };
  const concurrency = Math.max(1, Math.min(options.concurrency ?? 8, plan.length));
  await Promise.all(Array.from({ length: concurrency }, worker));
  const done = records.slice(0, emitted);
  return { records: done, summary: summarizeRecords(done, options.scenario) };
}
