import { canonicalJson } from '../core/canonical-json.ts';
import {
  RECORD_SCHEMA_VERSION,
  type EpisodeRecord,
  type Json,
  type Message,
  type ParsedAction,
  type RecordPolicy,
  type Task,
  type TurnRecord,
} from '../core/types.ts';
import { sealRecord } from '../record/record.ts';
import { extendedBy, stepContext, type ShownContext } from '../record/step-context.ts';
import { observationText } from '../openai/chat-bridge.ts';
import { assistantToAction } from '../openai/messages.ts';
import type { AssistantMessage, FinishReason, OpenAIMessage } from '../openai/wire.ts';

/**
 * An agent's episode as the gateway saw it, turned into the record every other part of the
 * framework reads (training, replay, the viewer, export). A turn is one chat request: the prompt is
 * what the agent sent, rendered into the model's template; the action is what was sampled, as ids;
 * the observation is whatever the agent sent after that answer in its next request (tool results,
 * a user message). When the next request extends the last one (the agent appended to its history)
 * the record concatenates, as the paper's trajectory; when it does not (the agent rewrote, cut or
 * summarized its history) the step stores what it was shown (the step-level MDP), so the loss is
 * always on the ids the model really sampled from what it really saw.
 */

/** What the agent sent for one turn: its messages, its tools and the rest of the request. */
export interface AgentRequest {
  messages: OpenAIMessage[];
  /** The tools offered (null: none). */
  tools: Json[] | null;
  /** Every other field the request set (model, temperature, max_tokens, stop, tool_choice, …). */
  params: { [key: string]: Json };
}

/** One answered request. */
export interface AgentTurn {
  request: AgentRequest;
  /** The generation seed used. */
  seed: number;
  /** The answer's text (cut at a stop string). */
  text: string;
  /** A token policy's: the rendered conversation's ids (the generation prompt included), the sampled ids and their log-probs. */
  prompt?: number[];
  tokens?: number[];
  logprobs?: number[];
  /** The answer as sent. */
  response: { message: AssistantMessage; finish_reason: FinishReason };
  /** For each assistant message in the request, in order: whether it was put in as that turn's sampled ids. */
  matched: boolean[];
}

/** Who an episode is: its place in a run and its task. */
export interface EpisodeSlot {
  runId: string;
  episodeId: string;
  index: number;
  task: Task;
  group: string;
  sample: number;
  seed: number;
  scenario: { id: string; version: string; options: { [key: string]: string } };
  policy: RecordPolicy;
  limits: { maxTurns: number; maxTokensPerTurn: number; maxTotalTokens: number };
}

/** How an episode ended: the agent's reward, or why it has none. */
export type EpisodeEnd =
  | { reward: number; success?: boolean; processRewards?: readonly number[]; metrics?: { [key: string]: number } }
  | { error: string };

/** An answer the episode gave: the message as sent, and the ids sampled for it (a token policy's). */
export interface GivenAnswer {
  message: AssistantMessage;
  tokens?: readonly number[];
}

/**
 * A request's assistant messages matched to the episode's answers by position (the k-th to the
 * k-th): whether each is that answer as it was sent back, and the sampled ids of those that are, by
 * message index (what the template puts in instead of their text).
 */
export function matchAnswers(
  messages: readonly OpenAIMessage[],
  answers: readonly (GivenAnswer | undefined)[],
): { matched: boolean[]; given: Map<number, readonly number[]> } {
  const matched: boolean[] = [];
  const given = new Map<number, readonly number[]>();
  messages.forEach((m, i) => {
    if (m.role !== 'assistant') return;
    const answer = answers[matched.length];
    const same = answer !== undefined && sameAnswer(m, answer.message);
    matched.push(same);
    if (same && answer.tokens) given.set(i, answer.tokens);
  });
  return { matched, given };
}

/** Whether the agent sent back an answer as it was given: its text and its calls (ids and spacing aside). */
function sameAnswer(sent: AssistantMessage, given: AssistantMessage): boolean {
  const calls = (m: AssistantMessage) =>
    (m.tool_calls ?? []).map((c) => [c.function.name, parsedArguments(c.function.arguments)]);
  const content = (m: AssistantMessage) => (m.content ?? '').trim();
  return content(sent) === content(given) && canonicalJson(calls(sent)) === canonicalJson(calls(given));
}

function parsedArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The history a request stands for, in the record's form: its leading messages, then each assistant
 * message (the sampled text where it is one of this episode's answers) and one observation with
 * whatever followed it.
 */
function historyOf(request: AgentRequest, turns: readonly AgentTurn[], matched: readonly boolean[]): Message[] {
  const { messages } = request;
  const out: Message[] = [];
  let i = 0;
  for (; i < messages.length && messages[i]!.role !== 'assistant'; i++)
    out.push({ content: messages[i]!.content ?? '', role: messages[i]!.role });
  let j = 0;
  while (i < messages.length) {
    const assistant = messages[i] as AssistantMessage;
    out.push({ content: matched[j] ? turns[j]!.text : assistantToAction(assistant), role: 'assistant' });
    const after: OpenAIMessage[] = [];
    for (i++; i < messages.length && messages[i]!.role !== 'assistant'; i++) after.push(messages[i]!);
    if (after.length > 0) out.push({ content: observationText(after, assistant), role: 'tool' });
    j++;
  }
  return out;
}

function actionOf(message: AssistantMessage): ParsedAction {
  const calls = message.tool_calls ?? [];
  if (calls.length === 0) return { kind: 'answer', text: message.content ?? '' };
  return {
    kind: 'tool_calls',
    calls: calls.map((c) => {
      const args = parsedArguments(c.function.arguments);
      const object = args !== null && typeof args === 'object' && !Array.isArray(args);
      return { name: c.function.name, arguments: (object ? args : { arguments: c.function.arguments }) as never };
    }),
  };
}

/**
 * A request as a record stores it: the messages it keeps of the one before plus that one's answer,
 * the rest, and its tools only where they changed (`tools` absent: as before).
 */
function requestDelta(request: AgentRequest, previous: AgentTurn | undefined): { [key: string]: Json } {
  const base = previous ? [...previous.request.messages, previous.response.message] : [];
  let keep = 0;
  while (
    keep < base.length &&
    keep < request.messages.length &&
    canonicalJson(base[keep]) === canonicalJson(request.messages[keep])
  )
    keep++;
  const out: { [key: string]: Json } = {
    keep,
    messages: request.messages.slice(keep) as unknown as Json[],
    params: request.params,
  };
  if (!previous || canonicalJson(previous.request.tools) !== canonicalJson(request.tools)) out.tools = request.tools;
  return out;
}

/** The requests a record's turns stand for (the inverse of requestDelta). */
export function recordedRequests(record: Pick<EpisodeRecord, 'turns'>): AgentRequest[] {
  const out: AgentRequest[] = [];
  let tools: Json[] | null = null;
  record.turns.forEach((turn, k) => {
    const stored = (turn.info?.request ?? {}) as {
      keep?: number;
      messages?: OpenAIMessage[];
      tools?: Json[] | null;
      params?: { [key: string]: Json };
    };
    const previous = out[k - 1];
    const response = (record.turns[k - 1]?.info?.response as { message?: AssistantMessage } | undefined)?.message;
    const base = previous && response ? [...previous.messages, response] : [];
    if ('tools' in stored) tools = stored.tools ?? null;
    out.push({
      messages: [...base.slice(0, stored.keep ?? 0), ...(stored.messages ?? [])],
      tools,
      params: stored.params ?? {},
    });
  });
  return out;
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

/** The sealed record of an episode: its turns as the gateway saw them and how it ended. */
export function agentRecord(slot: EpisodeSlot, turns: readonly AgentTurn[], end: EpisodeEnd): EpisodeRecord {
  const histories = turns.map((t) => historyOf(t.request, turns, t.matched));
  const first = turns[0];
  const prompt: Message[] = first ? histories[0]!.filter((_, i) => i < leading(first.request.messages)) : [];
  const processRewards = 'error' in end ? [] : (end.processRewards ?? []);
  const records: TurnRecord[] = [];
  const ids = turns.every((t) => t.prompt && t.tokens);
  let shown: ShownContext | null = first ? { messages: prompt, ...(ids ? { tokens: first.prompt } : {}) } : null;
  turns.forEach((turn, k) => {
    const next = turns[k + 1];
    // The observation is what the next request put after this answer, when it kept this answer.
    const nextHistory = next ? histories[k + 1]! : null;
    const at = nextHistory ? assistantIndex(nextHistory, k) : -1;
    const observation = at >= 0 && nextHistory![at + 1]?.role === 'tool' ? nextHistory![at + 1]!.content : null;
    const record: TurnRecord = {
      action: actionOf(turn.response.message),
      done: k === turns.length - 1,
      index: k,
      info: {
        request: requestDelta(turn.request, turns[k - 1]),
        response: turn.response as unknown as Json,
        seed: turn.seed,
      },
      observation,
      results: [],
      reward: processRewards[k] ?? 0,
      states: [],
      text: turn.text,
      tokenCount: turn.tokens?.length ?? 0,
    };
    if (ids) {
      const [before, action] = [turn.prompt!, turn.tokens!];
      // The ids the next request's prompt adds after this answer, when it starts with this prompt and answer.
      const extends_ = next !== undefined && startsWith(next.prompt!, before, action);
      record.logprobs = turn.logprobs ?? action.map(() => 0);
      record.observationTokens = extends_ ? next.prompt!.slice(before.length + action.length) : [];
      record.tokens = action;
    }
    if (k > 0) {
      const base = extendedBy(shown!, records[k - 1]!);
      const now: ShownContext = { messages: histories[k]!, ...(ids ? { tokens: turn.prompt } : {}) };
      if (canonicalJson(base) !== canonicalJson(now)) record.context = stepContext(base, now);
      shown = now;
    }
    records.push(record);
  });
  const last = turns.at(-1);
  const failed = 'error' in end;
  const outcome = failed
    ? { reward: 0, success: false }
    : { reward: end.reward, success: end.success ?? end.reward > 0, ...(end.metrics ? { metrics: end.metrics } : {}) };
  const processReward = sum(records.map((t) => t.reward));
  return sealRecord({
    answer: last && !last.response.message.tool_calls ? (last.response.message.content ?? '') : null,
    config: {
      maxTokensPerTurn: slot.limits.maxTokensPerTurn,
      maxToolOutputChars: 0,
      maxTotalTokens: slot.limits.maxTotalTokens,
      maxTurns: slot.limits.maxTurns,
      toolTimeoutMs: 0,
    },
    endReason: failed ? 'error' : 'answered',
    episodeId: slot.episodeId,
    ...(failed ? { error: end.error } : {}),
    group: slot.group,
    index: slot.index,
    outcome,
    policy: slot.policy,
    processReward,
    prompt,
    ...(first && ids ? { promptTokens: first.prompt } : {}),
    runId: slot.runId,
    sample: slot.sample,
    scenario: slot.scenario,
    schema: RECORD_SCHEMA_VERSION,
    seed: slot.seed,
    status: failed ? 'error' : 'ok',
    task: slot.task,
    totalReward: outcome.reward + processReward,
    totalTokens: sum(records.map((t) => t.tokenCount)),
    turns: records,
  } as Omit<EpisodeRecord, 'checksum'>);
}

/** How many messages lead a conversation before its first assistant message. */
function leading(messages: readonly OpenAIMessage[]): number {
  const i = messages.findIndex((m) => m.role === 'assistant');
  return i < 0 ? messages.length : i;
}

/** Where the k-th assistant message is in a history (-1: it has fewer). */
function assistantIndex(history: readonly Message[], k: number): number {
  let seen = -1;
  for (let i = 0; i < history.length; i++) if (history[i]!.role === 'assistant' && ++seen === k) return i;
  return -1;
}

function startsWith(ids: readonly number[], a: readonly number[], b: readonly number[]): boolean {
  if (ids.length < a.length + b.length) return false;
  for (let i = 0; i < a.length; i++) if (ids[i] !== a[i]) return false;
  for (let i = 0; i < b.length; i++) if (ids[a.length + i] !== b[i]) return false;
  return true;
}
