import { UsageError } from '../core/errors.ts';
import type { Message } from '../core/types.ts';
import { turnMessages } from '../record/step-context.ts';
import type { ContextInput, ToolEnv } from './tool-env.ts';

/**
 * Who owns what the policy sees at each step. The paper's form concatenates: every step sees the
 * prompt and every action and observation so far (one training sequence per episode). In the
 * step-level MDP (Agent-R1 v0.1) the ToolEnv presents each step's context and each step is a
 * training sample of its own; concatenation is then one context among many. A run picks one:
 *
 *   concat     the whole history (the default, unless the ToolEnv has a `context` hook of its own)
 *   window:K   the opening prompt and the last K turns
 *   card       the opening prompt and the scenario's state card (`ToolEnv.card`) in place of the turns
 */
export type ContextHook = (input: ContextInput<any, any>) => Message[] | Promise<Message[]>;

export const CONTEXT_MODES = ['concat', 'window:K', 'card'] as const;

/** The most turns a window may keep: far above any episode budget, low enough to catch a typo. */
export const MAX_WINDOW = 10_000;

/** A `--context` value that is none of the modes, or asks for a card the scenario does not have. */
export class ContextModeError extends UsageError {
  constructor(
    readonly value: string,
    problem = `valid: ${CONTEXT_MODES.join(', ')} (K a whole number from 1 to ${MAX_WINDOW})`,
  ) {
    super(`unknown context "${value}"; ${problem}`);
  }
}

export class NoCardError extends UsageError {
  constructor(readonly scenarioId: string) {
    super(
      `scenario ${scenarioId} has no state card (ToolEnv.card), so the "card" context cannot be used; ` +
        `use concat or window:K`,
    );
  }
}

type Mode = { kind: 'concat' } | { kind: 'window'; turns: number } | { kind: 'card' };

function parseMode(value: string): Mode {
  if (value === 'concat') return { kind: 'concat' };
  if (value === 'card') return { kind: 'card' };
  const window = /^window:([1-9]\d*)$/.exec(value);
  if (window && Number(window[1]) <= MAX_WINDOW) return { kind: 'window', turns: Number(window[1]) };
  throw new ContextModeError(value);
}

/** The opening prompt and the last `turns` turns. */
export function windowContext(turns: number): ContextHook {
  return ({ prompt, history }) => [...prompt, ...history.slice(-turns).flatMap(turnMessages)];
}

/** The opening prompt and the scenario's card of where the task stands. */
export function cardContext(env: Pick<ToolEnv<any, any>, 'card'>): ContextHook {
  return async ({ task, state, turn, prompt, history }) => [
    ...prompt,
    { content: await env.card!({ task, state, turn, history }), role: 'user' },
  ];
}

/**
 * The context setting a run records (EpisodeConfig.context): the mode as given, or nothing where
 * it means what no setting means (concatenation for a ToolEnv without a hook of its own), so that
 * such records keep their bytes. Throws a usage error for an unknown mode or a missing card.
 */
export function contextSetting(
  scenario: { id: string; env: Pick<ToolEnv<any, any>, 'context' | 'card'> },
  value: string | undefined,
): string | undefined {
  if (value === undefined) return undefined;
  const mode = parseMode(value);
  if (mode.kind === 'card' && !scenario.env.card) throw new NoCardError(scenario.id);
  return mode.kind === 'concat' && !scenario.env.context ? undefined : value;
}

/** The hook that makes each step's context under a run's setting; null: the steps concatenate. */
export function contextHook(
  scenario: { id: string; env: Pick<ToolEnv<any, any>, 'context' | 'card'> },
  value: string | undefined,
): ContextHook | null {
  const { env } = scenario;
  if (value === undefined) return env.context ? (input) => env.context!(input) : null;
  const mode = parseMode(value);
  switch (mode.kind) {
    case 'concat':
      return null;
    case 'window':
      return windowContext(mode.turns);
    case 'card':
      if (!env.card) throw new NoCardError(scenario.id);
      return cardContext(env);
  }
}
