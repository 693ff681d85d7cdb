import type { AnyStateMachine } from 'xstate';
import type { EpisodeConfig, EpisodeRecord, Message, Outcome, Task } from '../core/types.ts';
import type { ToolEnv } from '../env/tool-env.ts';
import type { Policy } from '../policy/policy.ts';
import type { OpenAITool, Tool } from '../tools/tool.ts';

export interface TaskQuery {
  split: string;
  seed: number;
  /** How many tasks; a scenario with a fixed set may return fewer. */
  count: number;
}

export interface PolicyFactoryContext {
  scenario: Scenario<any, any>;
  seed: number;
}

export type PolicyFactory = (ctx: PolicyFactoryContext) => Policy | Promise<Policy>;

/**
 * The user of a scenario (τ²-bench's simulated user, "dual control"): someone the agent talks with,
 * with instructions the agent does not see, tools of its own that act on the same world as the
 * agent's, and a policy of its own — a scripted one of the scenario's (seeded, in personas), or any
 * model policy (`hf:DIR`, `ckpt:DIR`, `openai:URL`).
 *
 * Turns: when the agent writes a message (not a tool call), the user replies; within its reply it
 * may call its own tools (each call a step, at most `maxSteps` steps in all) before it writes its
 * message. A message containing END_CONVERSATION (end-conversation.ts) ends the episode (`user_ended`); the agent is
 * shown the message without it.
 */
export interface UserRole<TTask extends Task = Task, TState = any> {
  /** The opening messages of the user's own view: its instructions (persona, what it knows, what it wants). */
  prompt(task: TTask, tools: readonly OpenAITool[]): Message[];
  tools: readonly Tool<any, TState>[];
  /** Scripted user policies by name. */
  policies: { [name: string]: PolicyFactory };
  /** The policy that plays the user unless a run names another. */
  defaultPolicy: string;
  /** Most steps (tool calls, then the message) of one reply; past it, the reply ends with no message. */
  maxSteps: number;
  /**
   * The user's reward for an episode, when a run trains the user (`train --roles agent,user`):
   * default the outcome's (a cooperative role); a competing role's is opposed, e.g. `-outcome.reward`.
   * `record`: the whole episode, for a reward that reads what the user said or did.
   */
  reward?(outcome: Outcome, record: EpisodeRecord): number;
}

/** Everything a scenario is: where tasks come from, what the agent can do, and what it means. */
export interface Scenario<TTask extends Task = Task, TState = any> {
  id: string;
  version: string;
  description: string;
  splits: readonly string[];
  /** Options the scenario was built with (e.g. `data` for the dataset scenarios); recorded for replay. */
  options: { [key: string]: string };
  tasks(query: TaskQuery): TTask[] | Promise<TTask[]>;
  /**
   * The task an id names, made again under this scenario's options (undefined: it names none). When a
   * scenario has it, replay checks each record's task against it, so a record whose options were
   * changed after the fact (a small map's task claimed for the large dungeon) does not verify.
   */
  task?(id: string): TTask | undefined;
  /** How many tasks a split has, for scenarios whose splits are fixed sets (absent: generated, no end). */
  taskCount?(split: string): number;
  tools: readonly Tool<any, TState>[];
  env: ToolEnv<TTask, TState>;
  /** Scripted reference policies by name (expert, random, naive-rag, …). */
  policies: { [name: string]: PolicyFactory };
  /** The user the agent talks with, when the task is a conversation (UserRole). */
  user?: UserRole<TTask, TState>;
  /** The environment's own state machine, when it has one (drawn by the viewer and the docs). */
  worldMachine?: AnyStateMachine;
  /** Scenario defaults for the episode budgets. */
  episode?: Partial<EpisodeConfig>;
  /**
   * Extra eval metrics (e.g. per question type): a new fold for each summary, given the records one
   * at a time in episode order, so a run of millions of episodes is summarized without holding it.
   */
  summarizer?(): Summarizer<{ [key: string]: unknown }, any>;
  /**
   * The folder a scenario of one's own was loaded from (an absolute path), set by `loadScenario`;
   * records carry it, so replay, the viewer and export find the scenario again. Absent for built-ins.
   */
  source?: string;
}

/**
 * A fold over a run's records: `add` each record in episode order, then read `result()`.
 *
 * With `digest`, `add` is given `digest(record)` instead of the record: the few values the fold
 * needs, taken from each record where it was played. A worker thread's records then reach the fold
 * without being parsed again on the main thread (without `digest` they are). `digest` must be a pure
 * function of the record and return data that survives structuredClone (numbers, strings, plain
 * objects and arrays); `scenario check` tries it.
 */
export interface Summarizer<
  TResult extends { [key: string]: unknown } = { [key: string]: unknown },
  TInput = EpisodeRecord,
> {
  digest?(record: EpisodeRecord): TInput;
  add(input: TInput): void;
  result(): TResult;
}

/** A scenario module's default export: the scenario, or a function of its options. */
export type ScenarioDefinition =
  | Scenario<any, any>
  | ((options: { [key: string]: string }) => Scenario<any, any> | Promise<Scenario<any, any>>);

export function defineScenario<T extends ScenarioDefinition>(definition: T): T {
  return definition;
}
