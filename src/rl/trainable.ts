import type * as tf from '@tensorflow/tfjs';
import type { Policy } from '../policy/policy.ts';
import type { SamplingOptions } from '../architectures/generation.ts';

/**
 * What the trainer needs from a model: one interface, so the loop does not depend on one model's
 * internals. The tfjs GPT policy adapts to it (src/rl/tfjs-trainable.ts); tests use a tiny model.
 */

/** Per-token outputs aligned with the input: column t is about token t given tokens before t. */
export interface ScoreOutput {
  /** [B, T] log π(tokens[t] | tokens[<t]); column 0 is 0. */
  logprobs: tf.Tensor2D;
  /** [B, T] V(state before token t) — only when asked for and the model has a value head. */
  values?: tf.Tensor2D;
  /** [B, T] entropy of π(· | tokens[<t]) — only when asked for. */
  entropy?: tf.Tensor2D;
}

export interface ScoreRequest {
  /** Token ids, one row per sequence; rows shorter than the longest are padded by the model. */
  tokens: readonly (readonly number[])[];
  /** Pad every row to this length (≥ the longest row), so shapes stay fixed across minibatches. */
  length: number;
  values?: boolean;
  entropy?: boolean;
  /**
   * Score the distribution rollouts sample from at this temperature (logits / T), so the policy
   * being optimized is the one that acted; absent or 1: the raw logits.
   */
  temperature?: number;
  /**
   * Optional, per row: 1 where the caller reads the outputs (the action tokens). A model may then
   * compute only those positions and leave the others 0.
   */
  mask?: readonly (readonly number[])[];
}

/** How a rollout samples: the generation options, with the temperature always stated (0: greedy). */
export type RolloutSampling = SamplingOptions & { temperature: number };

export interface TrainablePolicy {
  /** Sequences longer than this cannot be scored (the model's context). */
  readonly maxLength: number;
  readonly hasValueHead: boolean;
  /** The weights being trained. */
  readonly variables: tf.Variable[];
  /**
   * Forward pass over a batch. Differentiable in `variables`: the trainer calls it inside
   * tf.variableGrads. The caller disposes the returned tensors.
   */
  score(request: ScoreRequest): ScoreOutput;
  /** A Policy for rollouts with the current weights; its `version` is the content hash of those weights. */
  policy(sampling: RolloutSampling): Policy;
  /** Called after the weights changed: recompute the version, drop caches (KV caches of old weights). */
  weightsChanged(): Promise<void>;
  /** The current content hash. */
  version(): string;
  /** Writes a checkpoint (weights, config, tokenizer) that `load` and `ckpt:DIR` read back. */
  save(dir: string): Promise<void>;
  /** Replaces the weights with a saved checkpoint's (same architecture). */
  load(dir: string): Promise<void>;
  /** A frozen copy (the KL reference). */
  freeze(): Promise<Pick<TrainablePolicy, 'score' | 'maxLength'> & { dispose(): void }>;
}
