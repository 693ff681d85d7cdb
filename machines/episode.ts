import { assign, createActor, setup, type ActorScope, type SnapshotFrom } from 'xstate';
import { DEFAULT_EPISODE_CONFIG } from '../src/core/types.ts';
import type {
  EndReason,
  ReplyRecord,
  EpisodeConfig,
  Message,
  Outcome,
  ParsedAction,
  PolicyOutput,
  StepContext,
  StepResult,
  ToolCall,
  ToolResult,
  TurnRecord,
} from '../src/core/types.ts';
import { inCanonicalOrderCopy } from '../src/core/canonical-json.ts';
import { MalformedAnswerError } from '../src/core/errors.ts';
import { parseAction } from '../src/parse/parse-action.ts';
import { stepContext, type ShownContext } from '../src/record/step-context.ts';

/**
 * One episode of the Agent-R1 MDP as a state machine:
 *
 *   generate —parseToolCall→ execute → transition —reward→ (generate | context → generate | outcome → done)
 *
 * In a conversation (a scenario with a user), a message of the agent's (any action that is not a
 * tool call) goes to the user instead of ending the episode: `respond` waits for the user's reply,
 * which the ToolEnv turns into what the agent is shown next (a user message).
 *
 * With the paper's concatenation each step sees the whole history; in the step-level MDP the
 * machine waits in `context` after each turn for the ToolEnv to say what the next step is shown.
 *
 * The machine owns the control flow and the budgets; what the policy says, what the tools do and
 * what the ToolEnv makes of it come from outside (`EpisodeActors`), so the same machine runs live,
 * under test with scripted actors, and in replay with recorded ones. Each state waits on the
 * outside and is left by an event carrying the answer, sent by `runEpisodeMachine`. The two
 * synchronous stages are actions of those transitions, not states: parseToolCall (the action the
 * output asks for, parsed as GENERATED is made, so the transition's guard can route on it) and
 * reward (the turn's bookkeeping and budgets, on TRANSITIONED). As states they were left at once by
 * eventless transitions: two of a turn's five microsteps, 4 µs each. (Invoking a promise actor per
 * stage cost ten times the episode's own work: an actor, a snapshot and an AbortController each.)
 */

export interface GenerateInput {
  turn: number;
  messages: readonly Message[];
  tokens: readonly number[] | undefined;
  maxTokens: number;
}

export interface TransitionInput {
  turn: number;
  action: ParsedAction;
  results: ToolResult[];
  history: readonly TurnRecord[];
  /** The action's token ids, when the policy tokenizes (a chat template may need how the turn ended). */
  actionTokens?: readonly number[];
  /** The user's reply to the agent's message (conversations). */
  reply?: ReplyRecord;
}

export interface RespondInput {
  turn: number;
  /** The agent's message. */
  message: string;
  history: readonly TurnRecord[];
}

/** A step result plus the observation's token ids, when the policy tokenizes. */
export type TransitionOutput = StepResult & { observationTokens?: number[] };

export interface ContextRequest {
  /** The step the context is for. */
  turn: number;
  /** What the step before was shown. */
  previous: readonly Message[];
  history: readonly TurnRecord[];
}

export interface EpisodeOutcomeInput {
  answer: string | null;
  endReason: EndReason;
  history: readonly TurnRecord[];
}

/**
 * Where the episode's actions, tool results and judgements come from: the live policy, tools and
 * ToolEnv, or a record being replayed.
 */
export interface EpisodeActors {
  generate(input: GenerateInput, signal?: AbortSignal): Promise<PolicyOutput>;
  execute(input: ExecuteInput, signal?: AbortSignal): Promise<ToolResult[]>;
  /** The user's reply to the agent's message (conversations only). */
  respond(input: RespondInput, signal?: AbortSignal): Promise<ReplyRecord>;
  transition(input: TransitionInput): Promise<TransitionOutput>;
  /** The next step's context (step-level episodes only): messages, and their ids for a tokenizing policy. */
  context(input: ContextRequest): Promise<ShownContext>;
  outcome(input: EpisodeOutcomeInput): Promise<Outcome>;
}

export interface ExecuteInput {
  turn: number;
  calls: ToolCall[];
}

export interface EpisodeInput {
  config: EpisodeConfig;
  prompt: Message[];
  promptTokens?: number[];
  /** The ToolEnv presents each step's context (the step-level MDP); otherwise the history concatenates. */
  stepLevel?: boolean;
  /** The agent talks with a user: its messages are answered (respond), not the episode's end. */
  conversation?: boolean;
}

/** The answers that move the machine on from a waiting state. */
export type EpisodeEvent =
  | { type: 'GENERATED'; output: PolicyOutput; tokenCount: number; action: ParsedAction }
  | { type: 'EXECUTED'; results: ToolResult[] }
  | { type: 'RESPONDED'; reply: ReplyRecord }
  | { type: 'TRANSITIONED'; step: TransitionOutput }
  | { type: 'CONTEXTED'; shown: ShownContext }
  | { type: 'SCORED'; outcome: Outcome }
  | { type: 'FAILED'; error: unknown };

export interface EpisodeOutput {
  turns: TurnRecord[];
  answer: string | null;
  outcome: Outcome;
  totalTokens: number;
  endReason: EndReason;
  error: string | null;
}

/** Stand-in for a token count when a policy gives text only: UTF-8 bytes / 4, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

interface PendingTurn {
  /** What this step was shown, as the record stores it (step-level episodes, after the first turn). */
  context?: StepContext;
  output: PolicyOutput | null;
  tokenCount: number;
  action: ParsedAction | null;
  results: ToolResult[];
  reply?: ReplyRecord;
  states: string[];
}

interface EpisodeContext {
  config: EpisodeConfig;
  stepLevel: boolean;
  conversation: boolean;
  /** What the next step is shown: the whole history, or (step-level) the ToolEnv's context. */
  messages: Message[];
  tokens: number[] | undefined;
  totalTokens: number;
  turns: TurnRecord[];
  pending: PendingTurn;
  answer: string | null;
  endReason: EndReason | null;
  error: string | null;
  outcome: Outcome | null;
}

/** What a turn's path names: the machine's states and its two stages that are actions. */
type StageName =
  | 'generate'
  | 'parseToolCall'
  | 'execute'
  | 'respond'
  | 'transition'
  | 'reward'
  | 'context'
  | 'outcome'
  | 'done';

const emptyTurn = (): PendingTurn => ({
  output: null,
  tokenCount: 0,
  action: null,
  results: [],
  states: [],
});

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * A turn's path is noted by the transitions that events take: each notes the state it leaves (the
 * event was handled there), the stage it runs as its action (parseToolCall, reward) and, entering
 * the final state, done. Records name the same path as when the stages were states of their own.
 */
const withPath = (pending: PendingTurn, ...states: StageName[]): PendingTurn => ({
  ...pending,
  states: [...pending.states, ...states],
});

/**
 * Stages after a turn is finished (context; the episode's end: outcome, done) go on the last
 * finished turn's path, where there is one.
 */
function endPath(turns: TurnRecord[], ...states: StageName[]): TurnRecord[] {
  const last = turns.at(-1);
  if (!last) return turns;
  const ended = turns.slice(0, -1);
  ended.push({ ...last, states: [...last.states, ...states] });
  return ended;
}

/**
 * The parseToolCall stage: the action a policy's output asks for, with its token count. Made with
 * the GENERATED event (the guard out of generate routes on it), noted by the transition's action.
 */
function parseOutput(config: EpisodeConfig, output: PolicyOutput): { tokenCount: number; action: ParsedAction } {
  const tokenCount = output.tokens?.length ?? estimateTokens(output.text);
  const limit = config.maxTokensPerTurn;
  // A policy that ignored its per-turn budget gets the action refused, not silently cut.
  const action: ParsedAction =
    tokenCount > limit
      ? { error: `the action is ${tokenCount} tokens, over the per-turn limit of ${limit}`, kind: 'invalid' }
      : parseAction(output.text, config.actionFormat);
  return { tokenCount, action };
}

/** The tokens the episode holds once this step's observation is added. */
function totalTokensAfter(context: EpisodeContext, step: TransitionOutput): number {
  const observationCount =
    step.observation === null ? 0 : (step.observationTokens?.length ?? estimateTokens(step.observation));
  return context.totalTokens + context.pending.tokenCount + observationCount;
}

/** Why the episode ends with the turn this step finishes, or null if it goes on. */
function endReasonAfter(
  context: EpisodeContext,
  step: TransitionOutput,
  totalTokens = totalTokensAfter(context, step),
): EndReason | null {
  if (context.pending.reply?.ended) return 'user_ended';
  if (context.pending.action!.kind === 'answer' && !context.conversation) return 'answered';
  if (step.done) return 'done';
  if (context.turns.length + 1 >= context.config.maxTurns) return 'max_turns';
  if (totalTokens >= context.config.maxTotalTokens) return 'max_tokens';
  return null;
}

/** The reward stage, on TRANSITIONED: the turn is finished and the budgets checked. */
function finishTurn(context: EpisodeContext, step: TransitionOutput): Partial<EpisodeContext> {
  const { output, tokenCount, action, results, reply, states } = context.pending;
  // Fields in canonical (sorted) order, so that the record is written by JSON.stringify (the action's
  // tool-call arguments, as the model wrote them, copied into that order where they are not).
  const turn = { action: inCanonicalOrderCopy(action!) } as TurnRecord;
  if (context.pending.context) turn.context = context.pending.context;
  turn.done = step.done;
  turn.index = context.turns.length;
  if (step.info) turn.info = step.info;
  if (output!.logprobs) turn.logprobs = output!.logprobs;
  turn.observation = step.observation;
  if (step.observationTokens) turn.observationTokens = step.observationTokens;
  if (reply) turn.reply = reply;
  turn.results = results;
  turn.reward = step.reward;
  turn.states = [...states, 'transition', 'reward'];
  turn.text = output!.text;
  turn.tokenCount = tokenCount;
  if (output!.tokenDrift !== undefined) turn.tokenDrift = output!.tokenDrift;
  if (output!.tokens) turn.tokens = output!.tokens;

  const messages: Message[] = [...context.messages, { content: output!.text, role: 'assistant' }];
  if (step.observation !== null) messages.push({ content: step.observation, role: reply ? 'user' : 'tool' });
  const tokens = context.tokens && [...context.tokens, ...(output!.tokens ?? []), ...(step.observationTokens ?? [])];
  const answer = action!.kind === 'answer' ? action!.text : context.answer;
  const totalTokens = totalTokensAfter(context, step);
  return {
    turns: [...context.turns, turn],
    messages,
    tokens,
    totalTokens,
    answer,
    endReason: endReasonAfter(context, step, totalTokens),
    pending: emptyTurn(),
  };
}

/** The state an episode starts in (it enters it by no transition). */
const INITIAL_STATE = 'generate';

function initialContext(input: EpisodeInput): EpisodeContext {
  return {
    config: input.config,
    stepLevel: input.stepLevel ?? false,
    conversation: input.conversation ?? false,
    messages: input.prompt.slice(),
    tokens: input.promptTokens?.slice(),
    totalTokens: 0,
    turns: [],
    pending: emptyTurn(),
    answer: null,
    endReason: null,
    error: null,
    outcome: null,
  };
}

export const episodeMachine = setup({
  types: {
    context: {} as EpisodeContext,
    events: {} as EpisodeEvent,
    input: {} as EpisodeInput,
    output: {} as EpisodeOutput,
  },
  actions: {
    parseToolCall: assign(({ context, event }) => {
      const { output, tokenCount, action } = event as Extract<EpisodeEvent, { type: 'GENERATED' }>;
      return { pending: withPath({ ...context.pending, output, tokenCount, action }, 'generate', 'parseToolCall') };
    }),
    reward: assign(({ context, event }) =>
      finishTurn(context, (event as Extract<EpisodeEvent, { type: 'TRANSITIONED' }>).step),
    ),
    // The step's context replaces the history the turn just extended, which is what the record
    // stores it against (a context that only grows by the turn costs nothing to store).
    context: assign(({ context, event }) => {
      const { shown } = event as Extract<EpisodeEvent, { type: 'CONTEXTED' }>;
      const pending = emptyTurn();
      pending.context = stepContext({ messages: context.messages, tokens: context.tokens }, shown);
      return {
        turns: endPath(context.turns, 'context'),
        messages: shown.messages.slice(),
        tokens: shown.tokens?.slice(),
        pending,
      };
    }),
    fail: assign(({ context, event }, params: { left: StageName }) => {
      const error = context.error ?? errorText(event.type === 'FAILED' ? event.error : undefined);
      // A turn cut short is not recorded: only the stages after a finished turn go on a recorded path.
      return params.left === 'outcome'
        ? { turns: endPath(context.turns, 'outcome', 'done'), endReason: 'error' as const, error }
        : params.left === 'context'
          ? { turns: endPath(context.turns, 'context'), endReason: 'error' as const, error }
          : { pending: withPath(context.pending, params.left), endReason: 'error' as const, error };
    }),
  },
  guards: {
    callsTools: ({ event }) => event.type === 'GENERATED' && event.action.kind === 'tool_calls',
    messagesUser: ({ context, event }) =>
      context.conversation && event.type === 'GENERATED' && event.action.kind === 'answer',
    finished: ({ context, event }) => event.type === 'TRANSITIONED' && endReasonAfter(context, event.step) !== null,
    stepLevel: ({ context }) => context.stepLevel,
  },
}).createMachine({
  id: 'episode',
  context: ({ input }) => initialContext(input),
  initial: INITIAL_STATE,
  states: {
    generate: {
      on: {
        GENERATED: [
          { guard: 'callsTools', target: 'execute', actions: 'parseToolCall' },
          { guard: 'messagesUser', target: 'respond', actions: 'parseToolCall' },
          { target: 'transition', actions: 'parseToolCall' },
        ],
        FAILED: { target: 'outcome', actions: { type: 'fail', params: { left: 'generate' } } },
      },
    },
    execute: {
      on: {
        EXECUTED: {
          target: 'transition',
          actions: assign(({ context, event }) => ({
            pending: withPath({ ...context.pending, results: event.results }, 'execute'),
          })),
        },
        FAILED: { target: 'outcome', actions: { type: 'fail', params: { left: 'execute' } } },
      },
    },
    respond: {
      on: {
        RESPONDED: {
          target: 'transition',
          actions: assign(({ context, event }) => ({
            pending: withPath({ ...context.pending, reply: event.reply }, 'respond'),
          })),
        },
        FAILED: { target: 'outcome', actions: { type: 'fail', params: { left: 'respond' } } },
      },
    },
    transition: {
      on: {
        TRANSITIONED: [
          { guard: 'finished', target: 'outcome', actions: 'reward' },
          { guard: 'stepLevel', target: 'context', actions: 'reward' },
          { target: 'generate', actions: 'reward' },
        ],
        FAILED: { target: 'outcome', actions: { type: 'fail', params: { left: 'transition' } } },
      },
    },
    context: {
      on: {
        CONTEXTED: { target: 'generate', actions: 'context' },
        FAILED: { target: 'outcome', actions: { type: 'fail', params: { left: 'context' } } },
      },
    },
    outcome: {
      on: {
        SCORED: {
          target: 'done',
          actions: assign(({ context, event }) => ({
            turns: endPath(context.turns, 'outcome', 'done'),
            outcome: event.outcome,
          })),
        },
        FAILED: { target: 'done', actions: { type: 'fail', params: { left: 'outcome' } } },
      },
    },
    done: { type: 'final' },
  },
  output: ({ context }) => ({
    turns: context.turns,
    answer: context.answer,
    outcome: context.outcome ?? { reward: 0, success: false },
    totalTokens: context.totalTokens,
    endReason: context.endReason ?? 'error',
    error: context.error,
  }),
});

export type EpisodeMachine = typeof episodeMachine;

/**
 * Plays one episode: starts the machine, and while it waits in a state that needs the outside,
 * asks the actors and sends their answer (or their failure) back as the event that leaves it.
 */
export async function runEpisodeMachine(
  input: EpisodeInput,
  actors: EpisodeActors,
  signal?: AbortSignal,
): Promise<EpisodeOutput> {
  const scope = inertScope();
  let snapshot = initialSnapshot(input);
  while (snapshot.status === 'active') {
    snapshot = episodeMachine.transition(snapshot, await answer(snapshot, actors, signal), scope);
  }
  return snapshot.output!;
}

/**
 * The snapshot `getInitialSnapshot` gives: the machine at rest in its initial state with the
 * episode's context, made directly. The machine has no entry actions and no eventless transition
 * out of its initial state, so the init macrostep would only rediscover this (at 6 µs an episode, a
 * tenth of the machine's time in a short one).
 */
export function initialSnapshot(input: EpisodeInput): SnapshotFrom<EpisodeMachine> {
  return episodeMachine.resolveState({ value: INITIAL_STATE, context: initialContext(input) });
}

let scope: ActorScope<SnapshotFrom<EpisodeMachine>, EpisodeEvent> | undefined;

/**
 * The scope the machine's pure transitions run in. The machine only assigns (no children, no
 * side effects, no delays), so it needs no actor of its own: one inert actor serves every episode,
 * and its action executor is never called (any action that reached it would be a bug: it throws).
 */
function inertScope() {
  if (scope) return scope;
  const self = createActor(episodeMachine, { input: { config: DEFAULT_EPISODE_CONFIG, prompt: [] } });
  scope = {
    self,
    id: '',
    sessionId: '',
    system: self.system,
    logger: () => {},
    defer: () => {},
    emit: () => {},
    stopChild: () => {},
    actionExecutor: (action) => {
      throw new Error(`the episode machine has no side-effect actions, but was asked to run "${action.type}"`);
    },
  } as ActorScope<SnapshotFrom<EpisodeMachine>, EpisodeEvent>;
  return scope;
}

/** What the actors say to the state the machine waits in, as the event that leaves it. */
async function answer(
  snapshot: SnapshotFrom<EpisodeMachine>,
  actors: EpisodeActors,
  signal: AbortSignal | undefined,
): Promise<EpisodeEvent> {
  const { context } = snapshot;
  const turn = context.turns.length;
  try {
    switch (snapshot.value) {
      case 'generate': {
        const maxTokens = Math.min(
          context.config.maxTokensPerTurn,
          context.config.maxTotalTokens - context.totalTokens,
        );
        const input = { turn, messages: context.messages, tokens: context.tokens, maxTokens };
        const output = checkPolicyOutput(await actors.generate(input, signal));
        return { type: 'GENERATED', output, ...parseOutput(context.config, output) };
      }
      case 'execute': {
        const action = context.pending.action!;
        const calls = action.kind === 'tool_calls' ? action.calls : [];
        return { type: 'EXECUTED', results: await actors.execute({ turn, calls }, signal) };
      }
      case 'respond': {
        const action = context.pending.action as Extract<ParsedAction, { kind: 'answer' }>;
        const input = { turn, message: action.text, history: context.turns };
        return { type: 'RESPONDED', reply: await actors.respond(input, signal) };
      }
      case 'transition': {
        const { action, results, output, reply } = context.pending;
        const input: TransitionInput = { turn, action: action!, results, history: context.turns };
        if (output?.tokens) input.actionTokens = output.tokens;
        if (reply) input.reply = reply;
        return { type: 'TRANSITIONED', step: checkStep(await actors.transition(input)) };
      }
      case 'context': {
        const input = { turn, previous: context.messages, history: context.turns };
        return { type: 'CONTEXTED', shown: checkContext(await actors.context(input)) };
      }
      case 'outcome': {
        const input = { answer: context.answer, endReason: context.endReason!, history: context.turns };
        return { type: 'SCORED', outcome: checkOutcome(await actors.outcome(input)) };
      }
      default:
        throw new Error(`the episode machine waits in "${String(snapshot.value)}", which no actor answers`);
    }
  } catch (error) {
    return { type: 'FAILED', error };
  }
}

// What comes from outside (a user's policy or ToolEnv) is checked where it enters the machine: a
// malformed answer ends the episode as an error record that says what was wrong, rather than a
// TypeError from deep inside a transition, or a record with a NaN reward.

const isArrayOrAbsent = (v: unknown) => v === undefined || Array.isArray(v);
const isFiniteNumber = (v: unknown) => typeof v === 'number' && Number.isFinite(v);

function checkPolicyOutput(output: PolicyOutput): PolicyOutput {
  if (typeof output?.text !== 'string')
    throw new MalformedAnswerError('policy', 'an output without a string "text"', output);
  if (!isArrayOrAbsent(output.tokens) || !isArrayOrAbsent(output.logprobs))
    throw new MalformedAnswerError('policy', '"tokens" or "logprobs" that are not arrays', output);
  if (output.tokenDrift !== undefined && !(Number.isInteger(output.tokenDrift) && output.tokenDrift >= 0))
    throw new MalformedAnswerError('policy', 'a "tokenDrift" that is not an index', output);
  return output;
}

function checkStep(step: TransitionOutput): TransitionOutput {
  if (typeof step !== 'object' || step === null) throw new MalformedAnswerError('ToolEnv step', 'no step result', step);
  if (step.observation !== null && typeof step.observation !== 'string')
    throw new MalformedAnswerError('ToolEnv step', 'an observation that is neither a string nor null', step);
  if (!isFiniteNumber(step.reward))
    throw new MalformedAnswerError('ToolEnv step', 'a reward that is not a finite number', step);
  if (typeof step.done !== 'boolean')
    throw new MalformedAnswerError('ToolEnv step', 'a "done" that is not a boolean', step);
  return step;
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

function checkContext(shown: ShownContext): ShownContext {
  const { messages } = shown ?? {};
  if (!Array.isArray(messages) || messages.length === 0)
    throw new MalformedAnswerError('ToolEnv context', 'a context that is not a non-empty list of messages', messages);
  for (const m of messages) {
    if (typeof m !== 'object' || m === null || !ROLES.has(m.role) || typeof m.content !== 'string')
      throw new MalformedAnswerError('ToolEnv context', 'a message without a known role and a string content', m);
  }
  return shown;
}

function checkOutcome(outcome: Outcome): Outcome {
  if (typeof outcome !== 'object' || outcome === null || !isFiniteNumber(outcome.reward))
    throw new MalformedAnswerError('ToolEnv outcome', 'an outcome whose reward is not a finite number', outcome);
  if (typeof outcome.success !== 'boolean')
    throw new MalformedAnswerError('ToolEnv outcome', 'an outcome whose "success" is not a boolean', outcome);
  return outcome;
}
