import type { MessagePort } from 'node:worker_threads';
import { z } from 'zod';
import type { EpisodeConfig, Json, PolicyOutput } from '../core/types.ts';
import type { EncodingSpec } from '../policy/policy.ts';
import type { EpisodeDigest } from './finished-episode.ts';
import type { EpisodePlanItem, TaskDraw } from './plan.ts';

/**
 * Messages between rollout workers and the main thread. One MessageChannel per Piscina task: the
 * worker sends back finished episodes and, for a policy served from the main thread, asks its
 * batch queue for actions.
 */

/** One row of a generation request: an episode at its `generate` state. */
export const generateRowSchema = z.object({
  episodeId: z.string(),
  tokens: z.array(z.number().int().nonnegative()),
  seed: z.number().int(),
  maxTokens: z.number().int().positive(),
  turn: z.number().int().nonnegative(),
});
export type GenerateRow = z.infer<typeof generateRowSchema>;

export type WorkerMessage =
  | { type: 'generate'; id: number; rows: GenerateRow[] }
  | { type: 'release'; episodeId: string }
  /**
   * Finished episodes: their sealed JSONL lines as UTF-8 bytes end to end (`bytes`, transferred; line
   * i ends at `ends[i]`, no newlines) and the digest of each, which is all the main thread folds.
   */
  | { type: 'records'; bytes: Uint8Array; ends: number[]; digests: EpisodeDigest[] }
  /** The worker's event loop turns (sent every `heartbeatMs` once its scenario and policy are ready); its threadId. */
  | { type: 'alive'; thread: number };

export type ServerMessage =
  | { type: 'generated'; id: number; outputs: PolicyOutput[] }
  | { type: 'error'; id: number | null; message: string };

/**
 * How a worker gets its policy: a scenario reference policy by name; served from the main thread's
 * batch queue; or a copy of a checkpoint policy loaded in the worker (its own tfjs backend).
 */
export type WorkerPolicySpec =
  | { kind: 'scripted'; name: string; seed: number }
  | { kind: 'served'; id: string; version: string; encoding: EncodingSpec }
  | {
      kind: 'copy';
      id: string;
      version: string;
      checkpoint: string;
      weights: string;
      backend: string;
      sampling: Json;
      maxBatch: number;
    };

export interface ScenarioSpec {
  source: string;
  options: { [key: string]: string };
}

export interface RolloutTask {
  scenario: ScenarioSpec;
  policy: WorkerPolicySpec;
  runId: string;
  config: EpisodeConfig;
  /**
   * The episodes to play: plan items with their tasks, or (`drawn`) with each task named by its
   * place in the run's draw and its id, which the worker draws itself: a run's tasks are then never
   * copied to it, and a scenario whose draw differs in the worker is caught by the ids.
   */
  episodes: { items: EpisodePlanItem[] } | { drawn: TaskDraw; items: DrawnPlanItem[] };
  /** Episodes in flight at once inside the worker. */
  concurrency: number;
  port: MessagePort;
  /** How often the worker says it is alive; absent: never (nobody watches). */
  heartbeatMs?: number;
  /** One slot per item (SharedArrayBuffer): the worker sets an item's to 1 when its episode starts. */
  started?: Int32Array;
}

/** A plan item whose task is the `slot`-th of the run's draw (see RolloutTask.episodes). */
export type DrawnPlanItem = Omit<EpisodePlanItem, 'task'> & { taskId: string };

/** The first episode whose task the worker drew differently (`got`: its task id there, null for none). */
export interface DrawMismatch {
  index: number;
  got: string | null;
}

export interface RolloutTaskResult {
  episodes: number;
  toolMs: number;
  /** Set when the worker's draw differed from the main thread's: it played nothing. */
  drawMismatch?: DrawMismatch;
}
