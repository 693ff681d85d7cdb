import type { Rng } from '../core/rng.ts';
import type {
  Message,
  Outcome,
  ParsedAction,
  StepResult,
  Task,
  ToolResult,
  TurnRecord,
  EndReason,
} from '../core/types.ts';
import type { OpenAITool } from '../tools/tool.ts';

export interface StepInput<TTask extends Task = Task, TState = unknown> {
  task: TTask;
  state: TState;
  /** Index of the turn being judged (0-based). */
  turn: number;
  action: ParsedAction;
  /** Results of this turn's tool calls, in call order (empty unless the action called tools). */
  results: ToolResult[];
  /** The turns before this one. */
  history: readonly TurnRecord[];
  rng: Rng;
}

export interface OutcomeInput<TTask extends Task = Task, TState = unknown> {
  task: TTask;
  state: TState;
  /** The final answer, when the agent gave one. */
  answer: string | null;
  endReason: EndReason;
  history: readonly TurnRecord[];
}

/**
 * What an action means for the agent and the task. The Tool says what happened; the ToolEnv turns
 * that into the next observation, the process reward, whether the episode is over, and at the end
 * the outcome reward.
 */
export interface ToolEnv<TTask extends Task = Task, TState = unknown> {
  /** Per-episode state (a private database copy, a world actor). Created once per episode. */
  init?(task: TTask, ctx: { rng: Rng }): TState | Promise<TState>;
  /** Frees what init made; called once per episode, also after errors. */
  dispose?(state: TState): void | Promise<void>;
  /** The messages that open the episode (system prompt with the tools, the user's request). */
  prompt(task: TTask, tools: readonly OpenAITool[]): Message[];
  step(input: StepInput<TTask, TState>): StepResult | Promise<StepResult>;
  outcome(input: OutcomeInput<TTask, TState>): Outcome | Promise<Outcome>;
}
