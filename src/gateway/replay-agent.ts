import { canonicalJson } from '../core/canonical-json.ts';
import type { EpisodeRecord, Json } from '../core/types.ts';
import { OpenAIHttpError } from '../openai/errors.ts';
import { ChatServer } from '../openai/server.ts';
import {
  normalizeMessages,
  type AssistantMessage,
  type ChatCompletion,
  type ChatCompletionRequest,
  type FinishReason,
} from '../openai/wire.ts';
import type { Divergence, ReplayResult } from '../replay/replay.ts';
import { shownContexts } from '../record/step-context.ts';
import type { ChatFormat } from '../openai/chat-format.ts';
import type { AgentModule } from './agent-module.ts';
import { matchAnswers, recordedRequests, type AgentRequest, type EpisodeEnd } from './agent-record.ts';
import { UnknownEpisodeError } from './errors.ts';
import { paramsOf } from './gateway.ts';
import type { EpisodeGateway } from '../openai/episode-gateway.ts';
import { runAgent } from './play-agent.ts';

/** The first place two values differ: a path (`messages[2].content`) and both values. */
export function firstDifference(
  expected: unknown,
  actual: unknown,
  path = '',
): { path: string; expected: unknown; actual: unknown } | null {
  if (canonicalJson(expected) === canonicalJson(actual)) return null;
  const bothArrays = Array.isArray(expected) && Array.isArray(actual);
  const bothObjects =
    !bothArrays &&
    expected !== null &&
    actual !== null &&
    typeof expected === 'object' &&
    typeof actual === 'object' &&
    !Array.isArray(expected) &&
    !Array.isArray(actual);
  if (bothArrays) {
    const [a, b] = [expected as unknown[], actual as unknown[]];
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return { path: `${path}.length`, expected: a.length, actual: b.length };
  }
  if (bothObjects) {
    const [a, b] = [expected as Record<string, unknown>, actual as Record<string, unknown>];
    for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const d = firstDifference(a[key], b[key], path === '' ? key : `${path}.${key}`);
      if (d) return d;
    }
  }
  return { path: path === '' ? '(value)' : path, expected, actual };
}

interface Expected {
  record: EpisodeRecord;
  requests: AgentRequest[];
  next: number;
  divergence?: Divergence;
}

/**
 * A gateway that answers an agent from its records: each request of an episode is compared with the
 * one recorded for that turn (messages, tools, parameters) and answered with the recorded answer;
 * the first difference is kept, and the request that made it is refused (the agent stops there).
 * No model runs: a change in the agent's code or tools shows as a diff, at no cost.
 */
export class ReplayGateway implements EpisodeGateway {
  private readonly episodes = new Map<string, Expected>();

  constructor(readonly modelName: string) {}

  /** Expects an episode's requests (returned: the record's, rebuilt). */
  expect(record: EpisodeRecord): AgentRequest[] {
    const requests = recordedRequests(record);
    this.episodes.set(record.episodeId, { record, requests, next: 0 });
    return requests;
  }

  complete(): Promise<ChatCompletion> {
    return Promise.reject(
      new OpenAIHttpError(
        400,
        'a replay answers only requests of the recorded episodes (the x-agent-r1-episode header)',
      ),
    );
  }

  async completeTurn(episodeId: string, body: ChatCompletionRequest): Promise<ChatCompletion> {
    const e = this.episodes.get(episodeId);
    if (!e) throw new UnknownEpisodeError(episodeId);
    const k = e.next++;
    const refuse = (field: string, expected: unknown, actual: unknown): never => {
      e.divergence ??= { episodeId, turn: k, field, expected, actual };
      throw new OpenAIHttpError(
        409,
        `the request differs from the record at turn ${k + 1}, field ${field}`,
        'invalid_request_error',
        'replay_diverged',
      );
    };
    if (e.divergence) refuse('turns', 'no request after the divergence', 'a request');
    const recorded = e.requests[k];
    if (!recorded) return refuse('turns', e.requests.length, k + 1);
    const got: AgentRequest = {
      messages: normalizeMessages(body.messages),
      tools: (body.tools ?? null) as Json[] | null,
      params: paramsOf(body),
    };
    const d = firstDifference(recorded, got);
    if (d) refuse(d.path, d.expected, d.actual);
    const turn = e.record.turns[k]!;
    const response = turn.info?.response as unknown as { message: AssistantMessage; finish_reason: FinishReason };
    const tokens = turn.tokens ?? [];
    return {
      id: `chatcmpl-replay-${k}`,
      object: 'chat.completion',
      created: 0,
      model: this.modelName,
      system_fingerprint: `fp_${e.record.policy.version.slice(0, 12)}`,
      choices: [
        {
          index: 0,
          message: { ...response.message, refusal: null },
          finish_reason: response.finish_reason,
          logprobs: null,
          token_ids: tokens,
        },
      ],
      usage: { prompt_tokens: 0, completion_tokens: tokens.length, total_tokens: tokens.length },
    };
  }

  /** An agent that posts its own reward: compared with the record's when the episode is finished. */
  async reward(episodeId: string, body: unknown): Promise<EpisodeRecord> {
    const e = this.episodes.get(episodeId);
    if (!e) throw new UnknownEpisodeError(episodeId);
    const r = body as { reward?: unknown; success?: unknown };
    this.compareEnd(e, {
      reward: r?.reward as number,
      ...(typeof r?.success === 'boolean' ? { success: r.success } : {}),
    });
    return e.record;
  }

  /** The episode's verdict once its agent has returned: the first divergence, if any. */
  finish(episodeId: string, end: EpisodeEnd): Divergence | undefined {
    const e = this.episodes.get(episodeId)!;
    this.episodes.delete(episodeId);
    if (!e.divergence && e.next < e.requests.length)
      e.divergence = { episodeId, turn: e.next, field: 'turns', expected: e.requests.length, actual: e.next };
    if (!e.divergence) this.compareEnd(e, end);
    return e.divergence;
  }

  private compareEnd(e: Expected, end: EpisodeEnd): void {
    if (e.divergence) return;
    const { record } = e;
    const episodeId = record.episodeId;
    if ('error' in end) {
      if (record.status !== 'error')
        e.divergence = { episodeId, turn: null, field: 'error', expected: null, actual: end.error };
      return;
    }
    if (record.status === 'error') {
      // A record of a run that failed (it threw, timed out): the requests it made are what is compared.
      return;
    }
    const expected = { reward: record.outcome.reward, success: record.outcome.success };
    const actual = { reward: end.reward, success: end.success ?? end.reward > 0 };
    const d = firstDifference(expected, actual, 'outcome');
    if (d) e.divergence = { episodeId, turn: null, field: d.path, expected: d.expected, actual: d.actual };
  }
}

export interface AgentReplayResult {
  episodeId: string;
  verified: boolean;
  divergence?: Divergence;
}

/**
 * Re-runs the agent on each record's task against a gateway that answers from the record, one
 * episode at a time, and says for each whether every request and the reward were as recorded.
 */
export async function replayAgent(
  agent: AgentModule,
  records: AsyncIterable<EpisodeRecord> | Iterable<EpisodeRecord>,
  options: { timeoutMs?: number; onResult?: (result: AgentReplayResult, record: EpisodeRecord) => void } = {},
): Promise<AgentReplayResult[]> {
  const gateway = new ReplayGateway('agent-r1');
  const server = new ChatServer({ gateway });
  await server.listen(0, '127.0.0.1');
  const results: AgentReplayResult[] = [];
  try {
    for await (const record of records) {
      const requests = gateway.expect(record);
      // The agent is handed the model name it was handed when the record was made.
      const model = typeof requests[0]?.params.model === 'string' ? requests[0].params.model : 'agent-r1';
      const end = await runAgent(
        agent,
        record.task,
        { baseURL: server.url, apiKey: 'replay', model },
        record.episodeId,
        options.timeoutMs ?? 120_000,
      );
      const divergence = gateway.finish(record.episodeId, end);
      const result = { episodeId: record.episodeId, verified: !divergence, ...(divergence ? { divergence } : {}) };
      results.push(result);
      options.onResult?.(result, record);
    }
  } finally {
    await server.close();
  }
  return results;
}

/**
 * A record of the gateway checked on its own (plain `replay`): each turn's ids and log-probs agree
 * in number, its stored requests rebuild, and, given the model's chat format, each turn's prompt ids
 * are the template's rendering of its request (earlier answers as their sampled ids).
 */
export function checkAgentRecord(record: EpisodeRecord, format?: ChatFormat): Divergence | undefined {
  const episodeId = record.episodeId;
  const at = (turn: number | null, field: string, expected: unknown, actual: unknown): Divergence => ({
    episodeId,
    turn,
    field,
    expected,
    actual,
  });
  for (const turn of record.turns) {
    if (turn.tokens && turn.logprobs && turn.tokens.length !== turn.logprobs.length)
      return at(turn.index, 'logprobs.length', turn.tokens.length, turn.logprobs.length);
    const response = turn.info?.response as { message?: unknown } | undefined;
    if (!response?.message) return at(turn.index, 'info.response', 'the answer as sent', response ?? null);
  }
  let requests: AgentRequest[];
  try {
    requests = recordedRequests(record);
  } catch (err) {
    return at(null, 'info.request', 'requests that rebuild', String(err));
  }
  if (!format || !record.promptTokens) return undefined;
  const shown = shownContexts(record);
  const answers = record.turns.map((turn) => {
    const message = (turn.info?.response as { message?: AssistantMessage } | undefined)?.message;
    return message ? { message, tokens: turn.tokens } : undefined;
  });
  for (let k = 0; k < record.turns.length; k++) {
    const request = requests[k]!;
    // The sampled ids are what was answered: an edit to them (resealed, so the checksum holds) shows here.
    const sampled = record.turns[k]!.tokens;
    if (sampled) {
      const text = record.turns[k]!.text;
      const said = sampledTextDiffers(format, sampled, text, request.params.stop);
      if (said !== undefined) return at(k, 'tokens (decoded)', text, said);
    }
    // Earlier answers go in as the ids sampled for them, matched as the gateway matched them.
    const { given } = matchAnswers(request.messages, answers);
    const ids = format.prompt(request.messages, (request.tools ?? []) as never, Infinity, (i) => given.get(i));
    const d = firstDifference(shown[k]!.tokens, ids, 'prompt tokens');
    if (d) return at(k, d.path, d.expected, d.actual);
  }
  return undefined;
}

/**
 * Whether sampled ids stand for an answer's text: decoded whole (a GPT's `</tool_call>` stop is part
 * of its text) or less the end-of-turn id they end with, then cut before the request's stop string
 * that the last id completed, as the gateway cut it. Returns the decoded text when they do not.
 */
function sampledTextDiffers(
  format: ChatFormat,
  tokens: readonly number[],
  text: string,
  stop: Json | undefined,
): string | undefined {
  const stops = (typeof stop === 'string' ? [stop] : Array.isArray(stop) ? stop : []).filter(
    (s): s is string => typeof s === 'string' && s !== '',
  );
  const cut = (t: string) => t.slice(0, Math.min(...stops.map((s) => t.indexOf(s)).filter((i) => i >= 0), t.length));
  const whole = cut(format.decode(tokens));
  if (whole === text) return undefined;
  const ended = tokens.length > 0 && format.stopTokens.has(tokens.at(-1)!);
  if (ended && cut(format.decode(tokens.slice(0, -1))) === text) return undefined;
  return whole;
}

/** A gateway record's verdict in replay's shape (the viewer's and the report's). */
export function agentVerdict(record: EpisodeRecord, format?: ChatFormat): ReplayResult {
  const divergence = checkAgentRecord(record, format);
  return { episodeId: record.episodeId, verified: !divergence, ...(divergence ? { divergence } : {}) };
}
