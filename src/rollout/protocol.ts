import type { MessagePort } from 'node:worker_threads';
import { z } from 'zod';
import type { EpisodeConfig, EpisodeRecord, Json, PolicyOutput } from '../core/types.ts';
import type { EpisodePlanItem } from './rollout.ts';

/**
 * Messages between rollout workers and the main thread. One MessageChannel per Piscina task:
 * the worker asks the policy server for actions and sends back finished episodes.
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

export const workerMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('generate'), id: z.number().int(), rows: z.array(generateRowSchema).min(1) }),
  z.object({ type: z.literal('release'), episodeId: z.string() }),
  z.object({ type: z.literal('record'), record: z.unknown(), trajectory: z.unknown().optional() }),
]);

export type WorkerMessage =
  | { type: 'generate'; id: number; rows: GenerateRow[] }
  | { type: 'release'; episodeId: string }
  | { type: 'record'; record: EpisodeRecord; trajectory?: Trajectory };

export type ServerMessage =
  | { type: 'generated'; id: number; outputs: PolicyOutput[] }
  | { type: 'error'; id: number | null; message: string };

/** An episode's tokens for the trainer, as typed arrays (transferred between threads, not copied). */
export interface Trajectory {
  episodeId: string;
  tokens: Int32Array;
  /** 1 on the agent's own tokens. */
  mask: Uint8Array;
  /** Sampler log-probs on action tokens, 0 elsewhere. */
  logprobs: Float32Array;
  /** Rewards placed on tokens (process rewards at action ends, the outcome on the last action token). */
  rewards: Float32Array;
}

/** How a worker gets its policy: a scenario reference policy by name, or a remote one served from the main thread. */
export type WorkerPolicySpec =
  | { kind: 'scripted'; name: string }
  | { kind: 'remote'; id: string; version: string; tokenizer: Json };

export interface RolloutTask {
  scenario: { source: string; options: { [key: string]: string } };
  policy: WorkerPolicySpec;
  runId: string;
  config: EpisodeConfig;
  items: EpisodePlanItem[];
  /** Episodes in flight at once inside the worker. */
  concurrency: number;
  port: MessagePort;
}

export interface RolloutTaskResult {
  episodes: number;
  toolMs: number;
}
