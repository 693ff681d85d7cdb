import type { EpisodeRecord, Message, StepContext, TurnRecord } from '../core/types.ts';

/** What the policy is shown at one step: messages, and their token ids for a policy that tokenizes. */
export interface ShownContext {
  messages: readonly Message[];
  tokens?: readonly number[];
}

const sameMessage = (a: Message, b: Message) => a.role === b.role && a.content === b.content;

function commonPrefix<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && same(a[i]!, b[i]!)) i++;
  return i;
}

/**
 * A step's context as a record stores it: what it keeps of `base` (what concatenation would show:
 * the previous context, the last action and its observation) and what follows.
 */
export function stepContext(base: ShownContext, shown: ShownContext): StepContext {
  const keep = commonPrefix(base.messages, shown.messages, sameMessage);
  const messages = shown.messages.slice(keep);
  if (!shown.tokens) return { keep, messages };
  // Fields in canonical (sorted) order, as a record writes them.
  const keepTokens = base.tokens ? commonPrefix(base.tokens, shown.tokens, (x, y) => x === y) : 0;
  return { keep, keepTokens, messages, tokens: shown.tokens.slice(keepTokens) };
}

/** The context a stored StepContext stands for, given its base. */
export function shownFrom(base: ShownContext, context: StepContext): ShownContext {
  const shown: ShownContext = { messages: [...base.messages.slice(0, context.keep), ...context.messages] };
  if (context.tokens) shown.tokens = [...(base.tokens ?? []).slice(0, context.keepTokens ?? 0), ...context.tokens];
  return shown;
}

/** The messages a turn adds to the history when contexts concatenate: its action and its observation. */
export function turnMessages(turn: Pick<TurnRecord, 'text' | 'observation'>): Message[] {
  const out: Message[] = [{ content: turn.text, role: 'assistant' }];
  if (turn.observation !== null) out.push({ content: turn.observation, role: 'tool' });
  return out;
}

/** `shown` followed by a turn: the base of the next step's context. */
export function extendedBy(shown: ShownContext, turn: TurnRecord): ShownContext {
  const next: ShownContext = { messages: [...shown.messages, ...turnMessages(turn)] };
  if (shown.tokens) next.tokens = [...shown.tokens, ...(turn.tokens ?? []), ...(turn.observationTokens ?? [])];
  return next;
}

/**
 * Whether a record's steps were shown contexts of the ToolEnv's (the step-level MDP): its run asked
 * for one, or a step was shown one. (A one-turn episode of a ToolEnv's own hook shows neither, and
 * is the same either way.)
 */
export function isStepLevel(record: Pick<EpisodeRecord, 'turns' | 'config'>): boolean {
  const setting = record.config?.context;
  return (setting !== undefined && setting !== 'concat') || record.turns.some((t) => t.context !== undefined);
}

/**
 * What the policy was shown at each step of a record, rebuilt from the stored changes: step 0 sees
 * the prompt; a later step its stored context, or (concatenation) the one before plus that turn.
 */
export function shownContexts(record: Pick<EpisodeRecord, 'prompt' | 'promptTokens' | 'turns'>): ShownContext[] {
  let shown: ShownContext = record.promptTokens
    ? { messages: record.prompt, tokens: record.promptTokens }
    : { messages: record.prompt };
  const out: ShownContext[] = [];
  record.turns.forEach((turn, i) => {
    if (i > 0) {
      const base = extendedBy(shown, record.turns[i - 1]!);
      shown = turn.context ? shownFrom(base, turn.context) : base;
    }
    out.push(shown);
  });
  return out;
}
