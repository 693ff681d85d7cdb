import { createHash } from 'node:crypto';
import { canonicalJson } from '../core/canonical-json.ts';
import type { EpisodeConfig, Task } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { episodeConfig, episodeSeed } from '../episode/run-episode.ts';

/** What determines a run's episodes: which tasks, how many samples each, and their seeds. */
export interface PlanOptions {
  scenario: Scenario;
  policy: Policy;
  /** Who plays the scenario's user, when a run names one (default: the scenario's own). */
  userPolicy?: Policy;
  split: string;
  /** Total episodes (tasks × group). */
  episodes: number;
  seed: number;
  /** Samples per task (GRPO groups). */
  group?: number;
  config?: Partial<EpisodeConfig>;
  /** Overrides the task list (e.g. a trainer's batch); otherwise scenario.tasks(split, seed). */
  tasks?: Task[];
  /** Offset added to episode indices (a trainer's step). */
  indexOffset?: number;
}

export interface EpisodePlanItem {
  index: number;
  task: Task;
  /** The task's place in the run's task list. */
  slot: number;
  sample: number;
  seed: number;
}

/** The arguments of the scenario.tasks call that gave a run its task list. */
export interface TaskDraw {
  split: string;
  seed: number;
  count: number;
}

export interface EpisodePlan {
  runId: string;
  plan: EpisodePlanItem[];
  /** Where the tasks came from scenario.tasks (not from options.tasks): the call that drew them. */
  draw?: TaskDraw;
}

/** Which task and seed every episode of a run gets. Depends only on the options, never on timing. */
export async function planEpisodes(options: PlanOptions): Promise<EpisodePlan> {
  const group = Math.max(1, options.group ?? 1);
  const taskCount = Math.ceil(options.episodes / group);
  const draw = options.tasks ? undefined : { split: options.split, seed: options.seed, count: taskCount };
  const tasks = options.tasks ?? (await options.scenario.tasks(draw!));
  if (tasks.length === 0) {
    throw new RangeError(`scenario ${options.scenario.id} has no tasks in split "${options.split}"`);
  }
  const plan: EpisodePlanItem[] = [];
  for (let i = 0; i < options.episodes; i++) {
    // A scenario with fewer tasks than asked for cycles through them, with new sample indices.
    const slot = Math.floor(i / group);
    const task = tasks[slot % tasks.length]!;
    const sample = (i % group) + group * Math.floor(slot / tasks.length);
    plan.push({
      index: (options.indexOffset ?? 0) + i,
      task,
      slot: slot % tasks.length,
      sample,
      seed: episodeSeed(options.seed, task.id, sample),
    });
  }
  return { runId: runIdOf(options), plan, ...(draw ? { draw } : {}) };
}

/** A run id derived from what determines the run, so equal runs have equal ids (and equal bytes). */
export function runIdOf(options: PlanOptions): string {
  const key = canonicalJson({
    scenario: [options.scenario.id, options.scenario.version, options.scenario.options],
    policy: [options.policy.id, options.policy.version],
    ...(options.userPolicy ? { user: [options.userPolicy.id, options.userPolicy.version] } : {}),
    split: options.split,
    episodes: options.episodes,
    seed: options.seed,
    group: options.group ?? 1,
    config: episodeConfig(options.scenario, options.config, options.policy),
  });
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}
