import {
  runEpisodeMachine,
  type EpisodeActors,
  type EpisodeOutput,
  type GenerateInput,
} from '../../machines/episode.ts';
import { inCanonicalOrderCopy } from '../core/canonical-json.ts';
import { createRng, deriveSeed, type Rng } from '../core/rng.ts';
import { MalformedAnswerError } from '../core/errors.ts';
import type {
  EpisodeConfig,
  Message,
  ParsedAction,
  PolicyOutput,
  ReplyRecord,
  ReplyStep,
  StepResult,
  Task,
  ToolCall,
  ToolResult,
} from '../core/types.ts';
import { contextHook } from '../env/context.ts';
import { parseAction } from '../parse/parse-action.ts';
import type { PolicyEncoding } from '../policy/policy.ts';
import { END_CONVERSATION } from '../scenario/end-conversation.ts';
import type { Scenario, UserRole } from '../scenario/scenario.ts';
import { toOpenAITool, type OpenAITool } from '../tools/tool.ts';

/** How a driven episode gets its actions and tool results: live, or from a record. */
export interface EpisodeDrivers {
  act(input: GenerateInput & { seed: number; prompt: readonly Message[] }, signal?: AbortSignal): Promise<PolicyOutput>;
  execute(
    call: ToolCall,
    ctx: { turn: number; callIndex: number; rng: Rng; state: unknown; signal?: AbortSignal },
  ): Promise<ToolResult>;
  encode?: PolicyEncoding;
  /** Stops the episode: the policy and the tools are asked to give up. */
  signal?: AbortSignal;
  /** Whether `execute` runs the tools (the default) or feeds back recorded results: told to ToolEnv.init. */
  tools?: 'live' | 'recorded';
  /** The user's side of a conversation (a scenario with a user role): required there. */
  user?: UserDrivers;
  /** Told each turn's ToolEnv verdict as soon as it is known (the env server answers a step with it). */
  onStep?(turn: { turn: number; action: ParsedAction; results: readonly ToolResult[]; step: StepResult }): void;
}

/** Where the user's outputs and its tools' results come from: its live policy and tools, or a record. */
export interface UserDrivers {
  act(
    input: { turn: number; step: number; messages: readonly Message[]; seed: number; maxTokens: number },
    signal?: AbortSignal,
  ): Promise<PolicyOutput>;
  execute(
    call: ToolCall,
    ctx: { turn: number; step: number; callIndex: number; rng: Rng; state: unknown; signal?: AbortSignal },
  ): Promise<ToolResult>;
}

export interface DrivenEpisode extends EpisodeOutput {
  prompt: Message[];
  promptTokens?: number[];
  /** The opening messages of the user's view (a conversation). */
  userPrompt?: Message[];
}

/** The seeds of an episode's two streams: the sampler's (per turn) and the world's. */
export function samplerSeed(episodeSeed: number, turn: number): number {
  return deriveSeed(episodeSeed, 'sampler', turn);
}

export function worldSeed(episodeSeed: number): number {
  return deriveSeed(episodeSeed, 'world');
}

/** The seed of the user's sampler at one step of its reply to a turn. */
export function userSeed(episodeSeed: number, turn: number, step: number): number {
  return deriveSeed(episodeSeed, 'user', turn, step);
}

/**
 * A turn's tool results are bounded as each result is (maxToolOutputChars): once they hold this many
 * results' worth of characters, the turn's remaining calls are not run, each an error result that
 * says so. A turn's observation then stays within about that many results, however many calls it makes.
 */
export const TURN_OUTPUT_RESULTS = 8;

function turnFull(name: string, chars: number, limit: number): ToolResult {
  const message = `not run: this turn's tool results already hold ${chars} characters, the limit of a turn (${limit}: ${TURN_OUTPUT_RESULTS} × maxToolOutputChars)`;
  return { name, ok: false, content: message, error: { kind: 'tool_error', message } };
}

/**
 * Runs the episode machine for one task with the scenario's ToolEnv; the drivers decide where
 * actions and tool results come from. Live rollouts and replay both go through here, so they
 * cannot drift apart.
 */
export async function driveEpisode(
  scenario: Scenario,
  task: Task,
  seed: number,
  config: EpisodeConfig,
  drivers: EpisodeDrivers,
): Promise<DrivenEpisode> {
  const rng = createRng(worldSeed(seed));
  const env = scenario.env;
  // Resolved before init: a context the scenario cannot give is the run's mistake, not the episode's.
  const context = contextHook(scenario, config.context);
  const state = env.init ? await env.init(task, { rng, tools: drivers.tools ?? 'live' }) : undefined;
  try {
    // What the scenario's code gives is put in canonical order where it is not (copied), so that the
    // record holding it is written by JSON.stringify (see inCanonicalOrder).
    const tools = openAITools(scenario);
    const prompt = inCanonicalOrderCopy(env.prompt(task, tools));
    const promptTokens = drivers.encode?.prompt(prompt, tools);
    const user = scenario.user && userSide(scenario.user, task, seed, config, rng, state, drivers.user);
    // No `{ ...object, newField }` on this path: in Node 20's V8, once optimized, it gives every object
    // a hidden class of its own, which lives until a full GC and keeps what the object points to alive
    // through every young-generation GC until then (docs/benchmarks.md, engine).
    const actors: EpisodeActors = {
      generate: ({ turn, messages, tokens, maxTokens }, signal) =>
        drivers.act({ turn, messages, tokens, maxTokens, seed: samplerSeed(seed, turn), prompt }, signal),
      execute: async (input, signal) => {
        const results: ToolResult[] = [];
        const limit = TURN_OUTPUT_RESULTS * config.maxToolOutputChars;
        let chars = 0;
        // Calls of a turn run in order, so stochastic tools draw from the world stream in a fixed order.
        for (const [callIndex, call] of input.calls.entries()) {
          if (chars >= limit) {
            results.push(turnFull(call.name, chars, limit));
            continue;
          }
          const result = await drivers.execute(call, { turn: input.turn, callIndex, rng, state, signal });
          chars += result.content.length;
          results.push(result);
        }
        return results;
      },
      transition: async (input) => {
        const given = await env.step({
          task,
          state,
          rng,
          turn: input.turn,
          action: input.action,
          results: input.results,
          history: input.history,
          ...(input.reply ? { reply: input.reply } : {}),
        });
        const info = inCanonicalOrderCopy(given?.info);
        const step = info === given?.info ? given : Object.assign({}, given, { info });
        drivers.onStep?.({ turn: input.turn, action: input.action, results: input.results, step });
        const observationTokens =
          drivers.encode && step.observation !== null
            ? drivers.encode.observation(step.observation, input.actionTokens, input.reply ? 'user' : 'tool')
            : undefined;
        return observationTokens ? Object.assign({}, step, { observationTokens }) : step;
      },
      context: async (input) => {
        const { turn, previous, history } = input;
        const messages = inCanonicalOrderCopy(await context!({ task, state, turn, prompt, previous, history }));
        // The step's ids are its messages in the policy's template, encoded anew: the ToolEnv may have
        // rewritten anything, so nothing of the history's ids is assumed to carry over.
        const tokens = Array.isArray(messages) ? drivers.encode?.prompt(messages, tools) : undefined;
        return tokens ? { messages, tokens } : { messages };
      },
      respond: async (input, signal) => {
        if (!user) throw new Error(`scenario ${scenario.id} has no user to answer the agent's message`);
        return user.reply(input.turn, input.message, signal);
      },
      outcome: async (input) =>
        inCanonicalOrderCopy(
          await env.outcome({ task, state, answer: input.answer, endReason: input.endReason, history: input.history }),
        ),
    };
    // One signal per episode, following the run's: the episode's listeners attach to it, not to the
    // run's signal, which would otherwise hold one per tool call in flight across all episodes.
    const signal = drivers.signal && AbortSignal.any([drivers.signal]);
    const output = await runEpisodeMachine(
      { config, prompt, promptTokens, stepLevel: context !== null, conversation: user !== undefined },
      actors,
      signal,
    );
    const driven: DrivenEpisode = Object.assign(output, { prompt }); // the machine's output is this episode's own
    if (promptTokens) driven.promptTokens = promptTokens;
    if (user) driven.userPrompt = user.prompt;
    return driven;
  } finally {
    await env.dispose?.(state);
  }
}

const toolSchemas = new WeakMap<Scenario, OpenAITool[]>();

/** The scenario's tools in OpenAI shape, computed once per scenario. */
export function openAITools(scenario: Scenario) {
  let schemas = toolSchemas.get(scenario);
  if (!schemas) {
    schemas = scenario.tools.map(toOpenAITool);
    toolSchemas.set(scenario, schemas);
  }
  return schemas;
}

/**
 * The user's side of one episode: its own view of the conversation (its instructions, the agent's
 * messages as what it hears, its own turns and its tools' results), and its reply to each of the
 * agent's messages — steps of its policy until it writes a message, its tool calls run on the world.
 */
function userSide(
  role: UserRole,
  task: Task,
  seed: number,
  config: EpisodeConfig,
  rng: Rng,
  state: unknown,
  drivers: UserDrivers | undefined,
) {
  if (!drivers) throw new Error('a scenario with a user needs a policy to play it');
  const view: Message[] = inCanonicalOrderCopy(role.prompt(task, role.tools.map(toOpenAITool)));
  return {
    prompt: view.slice(),
    async reply(turn: number, message: string, signal?: AbortSignal): Promise<ReplyRecord> {
      view.push({ content: message, role: 'user' });
      const steps: ReplyStep[] = [];
      for (let step = 0; step < role.maxSteps; step++) {
        const out = await drivers.act(
          { turn, step, messages: view, seed: userSeed(seed, turn, step), maxTokens: config.maxTokensPerTurn },
          signal,
        );
        if (typeof out?.text !== 'string')
          throw new MalformedAnswerError('user policy', 'an output without a string "text"', out);
        const action = parseAction(out.text, 'hermes');
        const results: ToolResult[] = [];
        if (action.kind === 'tool_calls') {
          for (const [callIndex, call] of action.calls.entries())
            results.push(await drivers.execute(call, { turn, step, callIndex, rng, state, signal }));
        }
        steps.push(replyStep(out, action, results));
        view.push({ content: out.text, role: 'assistant' });
        if (action.kind === 'answer') {
          const ended = action.text.includes(END_CONVERSATION);
          const text = action.text.replaceAll(END_CONVERSATION, '').trim();
          return { ended, role: 'user', steps, text: text === '' ? null : text };
        }
        // A tool's results, or why the output was not a message or a call, are what the user sees next.
        const seen = action.kind === 'invalid' ? `error: ${action.error}` : results.map((r) => r.content).join('\n');
        view.push({ content: seen, role: 'tool' });
      }
      // A reply that never came to a message ends the conversation: the user gave up.
      return { ended: true, role: 'user', steps, text: null };
    },
  };
}

/** One step of a reply as the record keeps it (fields in canonical order). */
function replyStep(out: PolicyOutput, action: ParsedAction, results: ToolResult[]): ReplyStep {
  const step = { action } as ReplyStep;
  if (out.logprobs) step.logprobs = out.logprobs;
  step.results = results;
  step.text = out.text;
  if (out.tokens) step.tokens = out.tokens;
  return step;
}
