import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { ToolCache } from '../tools/runner.ts';
import type { EpisodePlanItem } from './plan.ts';
import { runEpisode } from '../episode/run-episode.ts';

/** Everything the episodes of one run share. */
export interface EpisodeContext {
  scenario: Scenario;
  policy: Policy;
  userPolicy?: Policy;
  runId: string;
  config: EpisodeConfig;
  toolCache?: ToolCache;
  /** Accumulates the time spent inside tools. */
  metrics?: { toolMs: number };
  signal?: AbortSignal;
  /** Told the position (in `items`) of each episode as it starts (a worker marks it for the watchdog). */
  onStart?: (position: number) => void;
}

/**
 * The one episode loop, on the main thread and in every worker: `concurrency` lanes each take the
 * next item in plan order and play it; `emit` hears each record as it finishes (in any order).
 * After an abort, or an emit that throws (which rejects the loop), no new episode starts.
 */
export async function playEpisodes(
  items: readonly EpisodePlanItem[],
  concurrency: number,
  context: EpisodeContext,
  emit: (record: EpisodeRecord) => void,
): Promise<void> {
  const { signal } = context;
  let next = 0;
  let yielded = performance.now();
  // A lane that fails (an emit that throws) stops the others from starting more episodes.
  let failed = false;
  const lane = async () => {
    while (next < items.length && !signal?.aborted && !failed) {
      // Scripted episodes can run entirely on microtasks: yield at least every millisecond, so that
      // signals and I/O get a turn (yielding after every episode cost more than a short episode).
      if (performance.now() - yielded >= 1) {
        await new Promise((resolve) => setImmediate(resolve));
        yielded = performance.now();
      }
      if (signal?.aborted || failed || next >= items.length) break;
      const position = next++;
      const item = items[position]!;
      context.onStart?.(position);
      const record = await runEpisode({
        scenario: context.scenario,
        task: item.task,
        policy: context.policy,
        userPolicy: context.userPolicy,
        seed: item.seed,
        index: item.index,
        sample: item.sample,
        group: item.task.id,
        runId: context.runId,
        config: context.config,
        toolCache: context.toolCache,
        metrics: context.metrics,
        signal,
      });
      try {
        emit(record);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, lane));
}
