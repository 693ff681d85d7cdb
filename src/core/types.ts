/**
 * The vocabulary of the Agent-R1 formulation. Everything here is plain JSON data, so tasks, turns
 * and records can cross worker threads and be written as JSONL unchanged.
 */

/** A JSON value, as records and tool outputs hold them. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One task of a scenario: the user's request plus what the scenario needs to judge it. */
export interface Task {
  /** Unique within the scenario (across splits). */
  id: string;
  split: string;
  /** The user's request, as the agent sees it. */
  question: string;
  /** A label for per-type metrics (question type, request kind). */
  type?: string;
  /** The reference answer, where the task has one. */
  answer?: string;
  /** Scenario-specific data (gold documents, expected database state); JSON only. */
  meta?: { [key: string]: Json };
}

export type Role = 'system' | 'user' | 'assistant' | 'tool';

/** A chat message; the episode's history as the policy sees it. */
export interface Message {
  role: Role;
  content: string;
}

/** A tool call as the agent wrote it. Arguments are unvalidated until the tool runner checks them. */
export interface ToolCall {
  name: string;
  arguments: { [key: string]: Json };
}

/** What an action text means, syntactically. */
export type ParsedAction =
  | { kind: 'tool_calls'; calls: ToolCall[] }
  | { kind: 'answer'; text: string }
  | { kind: 'invalid'; error: string };

export type ToolErrorKind = 'unknown_tool' | 'bad_arguments' | 'tool_error' | 'timeout';

/** What a tool call did: the Tool's raw result (or why it has none), before the ToolEnv interprets it. */
export interface ToolResult {
  name: string;
  ok: boolean;
  /** The result as text (JSON for structured outputs), cut to the runner's limit. */
  content: string;
  /** The structured output when the tool returned one (not cut). */
  data?: Json;
  truncated?: boolean;
  error?: { kind: ToolErrorKind; message: string };
}

/** The ToolEnv's reading of one turn. */
export interface StepResult {
  /** The observation text appended to the history (null: nothing to say, e.g. after an answer). */
  observation: string | null;
  /** Process reward for this step. */
  reward: number;
  /** The task is over (e.g. the agent answered). */
  done: boolean;
  info?: { [key: string]: Json };
}

/** The ToolEnv's verdict at the end of an episode. */
export interface Outcome {
  reward: number;
  success: boolean;
  /** Scenario metrics for this episode (em, f1, …). */
  metrics?: { [key: string]: number };
}

/**
 * Why an episode ended: the agent answered, the environment said the task is over, the user ended
 * the conversation (scenarios with a user role), a budget ran out, or an error.
 */
export type EndReason = 'answered' | 'done' | 'user_ended' | 'max_turns' | 'max_tokens' | 'error';
export const END_REASONS: readonly EndReason[] = ['answered', 'done', 'user_ended', 'max_turns', 'max_tokens', 'error'];

/** The roles besides the agent that may take turns in an episode. */
export const ROLES = ['user'] as const;
export type RoleName = (typeof ROLES)[number];

/** One generation of another role within its reply: what its policy wrote, what it asked for, what its tools did. */
export interface ReplyStep {
  text: string;
  tokens?: number[];
  logprobs?: number[];
  action: ParsedAction;
  results: ToolResult[];
}

/**
 * Another role's turn, in answer to the agent's message (τ²'s simulated user): the steps its policy
 * took (its own tool calls, on the same world, then its message), what the agent is shown, and
 * whether it ended the conversation.
 */
export interface ReplyRecord {
  role: RoleName;
  steps: ReplyStep[];
  /** The message the agent is shown (null when the role ended without one). */
  text: string | null;
  ended: boolean;
}

/** What the policy produced for one turn. Token ids and log-probs only when the policy has them. */
export interface PolicyOutput {
  text: string;
  tokens?: number[];
  logprobs?: number[];
  /**
   * Where the text re-encodes to other ids than those sampled (the first index that differs; BPE
   * is not one-to-one): the history keeps the sampled ids, and the record says so.
   */
  tokenDrift?: number;
}

/** One turn of an episode record. */
export interface TurnRecord {
  index: number;
  text: string;
  tokens?: number[];
  logprobs?: number[];
  /** The first index where the text's own ids differ from the sampled `tokens` (see PolicyOutput.tokenDrift). */
  tokenDrift?: number;
  /** The number of tokens this action counted against the budgets. */
  tokenCount: number;
  action: ParsedAction;
  results: ToolResult[];
  observation: string | null;
  /** Observation token ids, when the policy tokenizes (the history is token ids end to end). */
  observationTokens?: number[];
  reward: number;
  done: boolean;
  info?: { [key: string]: Json };
  /** Episode-machine states entered during this turn, in order. */
  states: string[];
  /**
   * What the policy was shown at this step, when the ToolEnv owns the context (the step-level MDP;
   * absent for the paper's concatenation and for the first turn, which sees the record's prompt).
   */
  context?: StepContext;
  /** The other role's reply to this turn's message (a scenario with a user): its observation is the reply's text. */
  reply?: ReplyRecord;
}

/**
 * A step's context, stored as a change to what concatenation would have shown: the previous
 * step's context, its action and its observation (the base). The first `keep` base messages are
 * kept and `messages` follow them; likewise for token ids. A context that only grows by the turn
 * costs nothing to store, and a window or a card costs its own size, never the whole history.
 */
export interface StepContext {
  keep: number;
  messages: Message[];
  /** Token ids, for a policy that tokenizes: the first `keepTokens` ids of the base, then `tokens`. */
  keepTokens?: number;
  tokens?: number[];
}

/** Budgets and limits of one episode. */
/**
 * How an action's text is read (src/parse/parse-action.ts): `tags` (the built-in GPT's: `<tool_call>`
 * or `<answer>`), `hermes` (a `<tool_call>` or the turn is the answer), `llama3-json`.
 */
export type ActionFormat = 'tags' | 'hermes' | 'llama3-json';

export const ACTION_FORMATS: readonly ActionFormat[] = ['tags', 'hermes', 'llama3-json'];

export interface EpisodeConfig {
  /** How actions are read; absent: `tags`. Set by the policy (a model's own tool-call syntax). */
  actionFormat?: ActionFormat;
  maxTurns: number;
  maxTokensPerTurn: number;
  maxTotalTokens: number;
  toolTimeoutMs: number;
  /** Tool output longer than this (characters) is cut, with a marker. */
  maxToolOutputChars: number;
  /**
   * Who owns the context each step is shown (src/env/context.ts): absent = the ToolEnv's own
   * `context` hook, or the paper's concatenation when it has none; `concat`, `window:K`, `card`.
   */
  context?: string;
}

/** Keys in canonical (sorted) order, so that a record's config is written by JSON.stringify. */
export const DEFAULT_EPISODE_CONFIG: EpisodeConfig = {
  maxTokensPerTurn: 256,
  maxToolOutputChars: 2048,
  maxTotalTokens: 4096,
  maxTurns: 10,
  toolTimeoutMs: 5000,
};

/**
 * The bounds of each episode budget (integers, inclusive): what the CLI's flags accept and what a
 * queue job may ask of a worker. Past them an episode would not end in any useful time (a billion
 * turns), or a timer would overflow (Node fires a setTimeout over 2^31 - 1 ms at once).
 */
/** The episode budgets that are numbers (the rest of EpisodeConfig is a setting: the context). */
export type EpisodeBudget = 'maxTurns' | 'maxTokensPerTurn' | 'maxTotalTokens' | 'toolTimeoutMs' | 'maxToolOutputChars';

export const EPISODE_LIMITS: { readonly [K in EpisodeBudget]: { readonly min: number; readonly max: number } } = {
  maxTurns: { min: 1, max: 1000 },
  maxTokensPerTurn: { min: 1, max: 65_536 },
  maxTotalTokens: { min: 1, max: 1_048_576 },
  toolTimeoutMs: { min: 1, max: 600_000 },
  maxToolOutputChars: { min: 1, max: 1_048_576 },
};

export const RECORD_SCHEMA_VERSION = 1;

/**
 * Who answered an episode's turns. `textOnly`: the answers are another model's text (a teacher
 * behind `serve --policy openai:URL`): no ids of ours were sampled, so the record is SFT data and
 * never RL data (buildTrajectory refuses it). Absent on every other record.
 */
export interface RecordPolicy {
  id: string;
  version: string;
  textOnly?: true;
}

/** One finished episode: everything replay needs, nothing that depends on timing. */
export interface EpisodeRecord {
  schema: number;
  runId: string;
  episodeId: string;
  /** Position in the run (records are written in this order). */
  index: number;
  /**
   * The scenario that played it. `source`: the folder a scenario of one's own was loaded from (an
   * absolute path; absent for built-in scenarios), so replay, the viewer and export can load it again.
   */
  scenario: { id: string; version: string; options: { [key: string]: string }; source?: string };
  task: Task;
  /** GRPO group key and the sample's index in it. */
  group: string;
  sample: number;
  seed: number;
  policy: RecordPolicy;
  /** Who played each other role (a scenario with a user), and the opening messages of its own view. */
  roles?: { [role in RoleName]?: { policy: RecordPolicy; prompt: Message[] } };
  config: EpisodeConfig;
  prompt: Message[];
  promptTokens?: number[];
  turns: TurnRecord[];
  answer: string | null;
  outcome: Outcome;
  processReward: number;
  totalReward: number;
  totalTokens: number;
  status: 'ok' | 'error';
  endReason: EndReason;
  error?: string;
  /** sha256 over the canonical JSON of every other field. */
  checksum: string;
}
