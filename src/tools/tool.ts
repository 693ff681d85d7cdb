import { z } from 'zod';
import type { Json, Task } from '../core/types.ts';
import type { Rng } from '../core/rng.ts';

/** What a tool sees besides its arguments. */
export interface ToolContext<TState = unknown> {
  task: Task;
  /** The episode's world stream: stochastic tools draw from it, so replay is exact. */
  rng: Rng;
  /** Aborted when the call times out or the episode stops; long-running tools should listen. */
  signal: AbortSignal;
  /** The episode's own environment state (a database copy, a world actor), from ToolEnv.init. */
  state: TState;
  /** The call's time limit (ms): the tool's own or the episode's; `signal` aborts when it passes. */
  timeoutMs: number;
}

/**
 * A result with two faces: `text` is what the agent is shown, `data` what the ToolEnv reads (and
 * replay feeds back). A tool returning plain JSON shows the agent that JSON; one whose text and data
 * differ (an MCP tool: text blocks, structured content) returns a ToolOutput.
 */
export class ToolOutput {
  constructor(
    readonly text: string,
    readonly data?: Json,
  ) {}
}

/** A tool declared as data: a zod schema for its arguments and a function that does the work. */
export interface Tool<TArgs extends z.ZodType = z.ZodType, TState = any> {
  name: string;
  description: string;
  parameters: TArgs;
  /** Returns the raw result: text, JSON data, or both (a ToolOutput). Throwing is fine: the runner turns it into an error result. */
  execute(args: z.infer<TArgs>, ctx: ToolContext<TState>): Promise<Json | ToolOutput> | Json | ToolOutput;
  /** Per-tool timeout (ms); the episode's default applies otherwise. */
  timeoutMs?: number;
  /** The tool is a pure function of its arguments, so its results may be cached across episodes. */
  cacheable?: boolean;
}

export function tool<TArgs extends z.ZodType, TState = any>(definition: Tool<TArgs, TState>): Tool<TArgs, TState> {
  if (!/^[a-zA-Z0-9_-]{1,64}$/.test(definition.name)) {
    throw new TypeError(`tool name "${definition.name}" must be 1-64 letters, digits, _ or -`);
  }
  return definition;
}

/** The OpenAI function-tool wire shape. */
export interface OpenAITool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export function toOpenAITool(t: Tool): OpenAITool {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(t.parameters) as Record<string, unknown>;
  return { type: 'function', function: { name: t.name, description: t.description, parameters } };
}
