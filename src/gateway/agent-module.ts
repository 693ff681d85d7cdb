import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { AgentR1Error } from '../core/errors.ts';
import type { Task } from '../core/types.ts';
import { importUserModule, scenarioEntry } from '../scenario/user-module.ts';
import type { OpenAIMessage } from '../openai/wire.ts';

/** What an agent gets to reach the model: settings for any OpenAI client (the headers name its episode). */
export interface AgentClient {
  baseURL: string;
  apiKey: string;
  model: string;
  headers: { [name: string]: string };
}

/** What an agent's run of a task comes to. */
export interface AgentResult {
  reward: number;
  success?: boolean;
  /** One per turn (model request), at most. */
  processRewards?: number[];
}

/**
 * An agent: the default export of the user's module. `signal` is aborted at the run's deadline (pass
 * it on as the AI SDK's abortSignal or the openai client's signal to stop early).
 */
export type AgentFunction = (
  task: Task,
  client: AgentClient,
  options: { signal: AbortSignal },
) => Promise<AgentResult> | AgentResult;

/**
 * A scripted demonstrator an agent's module may export as `demonstrator`: the answer a teacher would
 * give (the model's text, in its action syntax) for a task and the conversation so far. `start
 * --agent` and `train --agent` without --init warm-start the model on the agent's episodes with it.
 */
export type Demonstrator = (task: Task, messages: readonly OpenAIMessage[], episodeSeed: number) => string;

export interface AgentModule {
  run: AgentFunction;
  demonstrator?: Demonstrator;
  /** The module's file, and the sha256 of its bytes (the records' agent version). */
  file: string;
  version: string;
  /** A tasks.jsonl beside a folder's index, if there is one. */
  tasksFile?: string;
}

export class AgentModuleError extends AgentR1Error {
  constructor(
    readonly file: string,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`agent ${file}: ${why}`, options);
  }
}

/**
 * Loads an agent: a module file, or a folder with an index.ts (or .js). Named on the command line by
 * the user, so trusted; nothing in a task or a record names code.
 */
export async function loadAgent(path: string): Promise<AgentModule> {
  const full = resolve(path);
  if (!existsSync(full)) throw new AgentModuleError(full, 'no such file or folder');
  const folder = statSync(full).isDirectory();
  const file = folder ? scenarioEntry(full) : full;
  if (!file) throw new AgentModuleError(full, 'the folder has no index.ts (or index.js)');
  let mod: Record<string, unknown>;
  try {
    mod = await importUserModule(file);
  } catch (err) {
    throw new AgentModuleError(file, `could not be loaded: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  if (typeof mod.default !== 'function')
    throw new AgentModuleError(file, 'its default export is not a function `async (task, client) => ({ reward })`');
  if (mod.demonstrator !== undefined && typeof mod.demonstrator !== 'function')
    throw new AgentModuleError(file, 'its `demonstrator` export is not a function `(task, messages, seed) => text`');
  const tasks = folder ? resolve(full, 'tasks.jsonl') : undefined;
  return {
    run: mod.default as AgentFunction,
    ...(mod.demonstrator ? { demonstrator: mod.demonstrator as Demonstrator } : {}),
    file,
    version: createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16),
    ...(tasks && existsSync(tasks) ? { tasksFile: tasks } : {}),
  };
}
