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
  ReplyRecord,
} from '../core/types.ts';
import type { OpenAITool } from '../tools/tool.ts';

export interface InitContext {
  rng: Rng;
  tools: 'live' | 'recorded';
}

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
  /** The user's reply, when the action was a message to the user (a scenario with a user role). */
  reply?: ReplyRecord;
}

export interface ContextInput<TTask extends Task = Task, TState = unknown> {
  task: TTask;
  state: TState;
  /** Index of the step this context is for (1-based: step 0 is shown the prompt). */
  turn: number;
  /** The messages that opened the episode (`ToolEnv.prompt`). */
  prompt: readonly Message[];
  /** What the policy was shown at the step before. */
  previous: readonly Message[];
  /** The turns so far, the last one just finished. */
  history: readonly TurnRecord[];
}

export interface CardInput<TTask extends Task = Task, TState = unknown> {
  task: TTask;
  state: TState;
  turn: number;
  history: readonly TurnRecord[];
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
  /**
   * Per-episode state (a private database copy, a world actor). Created once per episode. `tools`:
   * whether the tools will run (`live`) or their results come from a record (`recorded`, replay), so
   * an episode being replayed need not start what only the tools use (a server, a connection).
   */
  init?(task: TTask, ctx: InitContext): TState | Promise<TState>;
  /** Frees what init made; called once per episode, also after errors. */
  dispose?(state: TState): void | Promise<void>;
  /** The messages that open the episode (system prompt with the tools, the user's request). */
  prompt(task: TTask, tools: readonly OpenAITool[]): Message[];
  step(input: StepInput<TTask, TState>): StepResult | Promise<StepResult>;
  outcome(input: OutcomeInput<TTask, TState>): Outcome | Promise<Outcome>;
  /**
   * The step-level MDP: the complete message list the policy sees at the next step (a window, a
   * summary, a state card instead of the transcript). Without it, each step sees the whole history
   * (the paper's concatenation). A run's `context` setting can replace it (src/env/context.ts).
   */
  context?(input: ContextInput<TTask, TState>): Message[] | Promise<Message[]>;
  /**
   * Where the task stands, in a few lines (position and inventory; the facts found so far): what the
   * built-in `card` context shows after the opening prompt, in place of the transcript.
   */
  card?(input: CardInput<TTask, TState>): string | Promise<string>;
}
