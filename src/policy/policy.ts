import type { ActionFormat, Json, Message, PolicyOutput, Task } from '../core/types.ts';
import type { OpenAITool } from '../tools/tool.ts';

export interface PolicyRequest {
  episodeId: string;
  task: Task;
  tools: readonly OpenAITool[];
  /** The whole history as messages: system, user, then assistant/tool turns. */
  messages: readonly Message[];
  /** The whole history as token ids, for policies that tokenize (see Policy.encode). */
  tokens?: readonly number[];
  turn: number;
  /** Seed of this turn's sampler stream, derived from the episode seed. */
  seed: number;
  /** The most tokens this turn may generate. */
  maxTokens: number;
  signal?: AbortSignal;
}

/**
 * Token-level policies say how text becomes token ids, so the history is kept as ids end to end:
 * the prompt and each observation are encoded once and appended, never re-encoded with the actions.
 */
export interface PolicyEncoding {
  /** The prompt's ids, up to and with the assistant's turn opening (`tools`: for templates that list them). */
  prompt(messages: readonly Message[], tools?: readonly OpenAITool[]): number[];
  /**
   * The tokens appended after an action: the observation in the chat template, up to the next
   * assistant turn. `action`: the action's ids, where the template needs to know how the turn ended.
   * `role`: a tool's result (the default), or the user's reply in a conversation.
   */
  observation(text: string, action?: readonly number[], role?: 'tool' | 'user'): number[];
  /** Tokens appended when an action produced no observation (closing the assistant turn). */
  end?(): number[];
}

export interface Policy {
  /** What kind of policy (`expert`, `random`, `ckpt:runs/sft`). */
  id: string;
  /** A content hash or fixed tag: what produced a record. */
  version: string;
  act(request: PolicyRequest): Promise<PolicyOutput>;
  encode?: PolicyEncoding;
  /** How a worker thread rebuilds `encode` (a tokenizing policy that workers can play). */
  encodingSpec?: EncodingSpec;
  /** How this policy's actions are read (its model's tool-call syntax); absent: `tags`. */
  actionFormat?: ActionFormat;
  /** Called when an episode ends, so a policy can drop per-episode caches. */
  release?(episodeId: string): void;
}

/**
 * A tokenizing policy's encoding as data, so a worker thread can rebuild it: the built-in GPT's
 * tokenizer, or a Hugging Face folder (its tokenizer and chat template are read there).
 */
export type EncodingSpec = { kind: 'gpt'; tokenizer: Json } | { kind: 'hf'; dir: string };

/** A policy that generates for many episodes in one call; the policy server batches requests into it. */
export interface BatchPolicy extends Policy {
  actBatch(requests: readonly PolicyRequest[]): Promise<PolicyOutput[]>;
}
