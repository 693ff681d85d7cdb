import pLimit, { type LimitFunction } from 'p-limit';
import type { PolicyOutput } from '../core/types.ts';
import type { Policy, PolicyRequest } from '../policy/policy.ts';
import { ExternalPolicyError, PolicySpecError } from './errors.ts';
import { assistantToAction, historyToOpenAI } from './messages.ts';
import type { AssistantMessage, OpenAIToolCall } from './wire.ts';

export interface OpenAIPolicyOptions {
  model: string;
  /** The API's base URL, with its version path (`http://127.0.0.1:8000/v1`). */
  baseURL: string;
  apiKey?: string;
  /** Sampling sent with every request (omitted: the server's defaults). */
  temperature?: number;
  topP?: number;
  /** Ask for log-probs (recorded when the server returns them). Default true. */
  logprobs?: boolean;
  /** Requests in flight at once, over all episodes (default 8). */
  concurrency?: number;
  /** Per-attempt timeout (default 120 s). */
  timeoutMs?: number;
  /** Retries after the first attempt on 408/409/429/5xx, network errors and timeouts (default 4). */
  maxRetries?: number;
  /** First backoff (doubles per retry, at most 30 s; a Retry-After header wins). Default 500 ms. */
  backoffMs?: number;
  /** Injected for tests; defaults to the global fetch. */
  fetch?: typeof fetch;
}

/** What one episode's earlier turns looked like on the wire: the model's own messages, by turn. */
type Sent = Map<number, { text: string; message: AssistantMessage }>;

/**
 * Any OpenAI-compatible chat endpoint (vLLM, llama.cpp's server, Ollama, a hosted API, `agent-r1
 * serve`) as a policy. Each turn sends the episode's history as OpenAI messages with the scenario's
 * tools; the answer may call tools natively (`tool_calls`) or write Hermes `<tool_call>` text in its
 * content. Native calls are written into the action as Hermes text, so parsing, records and replay
 * work unchanged and replay needs no network. Token ids (`token_ids`, or vLLM's `token_id:N` log-prob
 * tokens) and log-probs are recorded when the server returns them.
 *
 * Requests go through a concurrency limit; a failed attempt (429, 5xx, a timeout, a dropped
 * connection) is retried with exponential backoff; anything else fails the turn at once (the
 * episode then ends with an error record, the rollout goes on). The per-turn sampler seed is sent
 * as `seed`, so servers that honour it give reproducible samples.
 */
export class OpenAIPolicy implements Policy {
  readonly id: string;
  readonly version: string;
  private readonly limit: LimitFunction;
  private readonly sent = new Map<string, Sent>();
  private readonly endpoint: string;

  constructor(private readonly options: OpenAIPolicyOptions) {
    if (!options.model) throw new PolicySpecError('an OpenAI policy needs a model name');
    let url: URL;
    try {
      url = new URL(options.baseURL);
    } catch {
      throw new PolicySpecError(`"${options.baseURL}" is not a URL (expected e.g. http://127.0.0.1:8000/v1)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new PolicySpecError(`base URL ${options.baseURL} must be http(s)`);
    this.endpoint = options.baseURL.replace(/\/+$/, '') + '/chat/completions';
    this.id = `openai:${options.model}@${options.baseURL}`;
    this.version = options.model;
    this.limit = pLimit(options.concurrency ?? 8);
  }

  async act(request: PolicyRequest): Promise<PolicyOutput> {
    const sent: Sent = this.sent.get(request.episodeId) ?? new Map();
    this.sent.set(request.episodeId, sent);
    const messages = historyToOpenAI(request.messages, (turn, text) => {
      const s = sent.get(turn);
      return s?.text === text ? s.message : undefined;
    });
    const o = this.options;
    const body: Record<string, unknown> = {
      model: o.model,
      messages,
      max_tokens: request.maxTokens,
      seed: request.seed,
      ...(request.tools.length > 0 ? { tools: request.tools, tool_choice: 'auto' } : {}),
      ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
      ...(o.topP !== undefined ? { top_p: o.topP } : {}),
      ...((o.logprobs ?? true) ? { logprobs: true } : {}),
    };
    const response = await this.limit(() => requestJson(this.endpoint, body, this.options, request.signal));
    const { output, message } = readCompletion(response);
    sent.set(request.turn, { text: output.text, message });
    return output;
  }

  release(episodeId: string): void {
    this.sent.delete(episodeId);
  }
}

/** How requestJson retries (OpenAIPolicyOptions' fields of the same names). */
export type RetryOptions = Pick<OpenAIPolicyOptions, 'apiKey' | 'timeoutMs' | 'maxRetries' | 'backoffMs' | 'fetch'>;

/**
 * One JSON request to an OpenAI-compatible endpoint (a POST of `body`, or a GET when it is
 * undefined), with a per-attempt timeout and retries with exponential backoff on 408/409/429/5xx,
 * network errors and timeouts (Retry-After honoured). The parsed JSON answer, or an
 * ExternalPolicyError saying what failed (the URL, the status and the server's message).
 */
export async function requestJson(
  url: string,
  body: unknown,
  options: RetryOptions = {},
  signal?: AbortSignal,
): Promise<unknown> {
  const retries = options.maxRetries ?? 4;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const doFetch = options.fetch ?? fetch;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted();
    let failure: { message: string; status?: number; retryAfterMs?: number; retry: boolean };
    try {
      const res = await doFetch(url, {
        method: payload === undefined ? 'GET' : 'POST',
        headers: {
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
        },
        ...(payload === undefined ? {} : { body: payload }),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      if (res.ok) {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          throw new ExternalPolicyError(
            `${url} answered ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
            res.status,
          );
        }
      }
      failure = {
        status: res.status,
        message: `${url} answered ${res.status}: ${errorMessage(text)}`,
        retry: res.status === 408 || res.status === 409 || res.status === 429 || res.status >= 500,
        retryAfterMs: retryAfter(res.headers),
      };
    } catch (err) {
      if (err instanceof ExternalPolicyError) throw err;
      if (signal?.aborted) throw signal.reason ?? err;
      const timedOut = err instanceof Error && err.name === 'TimeoutError';
      const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
      failure = {
        message: timedOut
          ? `${url} did not answer within ${timeoutMs} ms`
          : `${url}: ${(err as Error).message}${cause}`,
        retry: true,
      };
    }
    if (!failure.retry || attempt >= retries) {
      const tries = attempt + 1;
      throw new ExternalPolicyError(
        `${failure.message}${failure.retry ? ` (gave up after ${tries} attempts)` : ''}`,
        failure.status,
      );
    }
    const backoff = Math.min(30_000, (options.backoffMs ?? 500) * 2 ** attempt);
    await sleep(failure.retryAfterMs ?? backoff, signal);
  }
}

/** The action (and token ids / log-probs, when present) in a chat completion, plus the message as sent. */
export function readCompletion(response: unknown): { output: PolicyOutput; message: AssistantMessage } {
  const choice = (response as { choices?: unknown[] } | null)?.choices?.[0] as
    | {
        message?: { content?: unknown; tool_calls?: unknown; refusal?: unknown };
        logprobs?: { content?: unknown } | null;
        token_ids?: unknown;
      }
    | undefined;
  const m = choice?.message;
  if (!m || typeof m !== 'object')
    throw new ExternalPolicyError(
      `the completion has no choices[0].message: ${JSON.stringify(response).slice(0, 200)}`,
    );
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls.filter(isToolCall) : [];
  const content = typeof m.content === 'string' ? m.content : typeof m.refusal === 'string' ? m.refusal : null;
  const message: AssistantMessage =
    calls.length > 0 ? { role: 'assistant', content, tool_calls: calls } : { role: 'assistant', content };
  const output: PolicyOutput = { text: assistantToAction(message) };
  const entries = Array.isArray(choice.logprobs?.content)
    ? (choice.logprobs.content as Array<{ token?: unknown; logprob?: unknown }>)
    : [];
  const logprobs = entries.map((e) => (typeof e.logprob === 'number' ? e.logprob : NaN));
  if (entries.length > 0 && logprobs.every(Number.isFinite)) output.logprobs = logprobs;
  const fromLogprobs = entries.map((e) =>
    typeof e.token === 'string' && /^token_id:\d+$/.test(e.token) ? Number(e.token.slice(9)) : NaN,
  );
  const ids = isIds(choice.token_ids)
    ? choice.token_ids
    : entries.length > 0 && fromLogprobs.every(Number.isInteger)
      ? fromLogprobs
      : undefined;
  if (ids && (!output.logprobs || output.logprobs.length === ids.length)) output.tokens = ids;
  return { output, message };
}

function isToolCall(c: unknown): c is OpenAIToolCall {
  const f = (c as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
  return (
    typeof (c as { id?: unknown })?.id === 'string' && typeof f?.name === 'string' && typeof f.arguments === 'string'
  );
}

function isIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((x) => Number.isInteger(x) && x >= 0);
}

function errorMessage(text: string): string {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof m === 'string') return m;
  } catch {
    // not JSON: the raw text, cut
  }
  return text.slice(0, 300) || '(empty body)';
}

/** Retry-After in seconds or an HTTP date, or OpenAI's retry-after-ms. */
function retryAfter(headers: Headers): number | undefined {
  const ms = Number(headers.get('retry-after-ms'));
  if (headers.get('retry-after-ms') !== null && Number.isFinite(ms) && ms >= 0) return Math.min(ms, 60_000);
  const v = headers.get('retry-after');
  if (v === null) return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, 60_000);
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - Date.now()), 60_000);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}

const SPEC = /^openai:(.+)@(https?:\/\/.+)$/;

/**
 * `openai:MODEL@BASE_URL` → options. The key comes from the environment: AGENT_R1_OPENAI_API_KEY, else
 * OPENAI_API_KEY (none: no Authorization header, as local servers expect). Optional tuning, also
 * from the environment: AGENT_R1_OPENAI_TEMPERATURE, _TOP_P, _CONCURRENCY, _TIMEOUT_MS, _MAX_RETRIES,
 * _LOGPROBS (0 to not ask for log-probs, for endpoints that refuse them).
 */
export function openAIOptionsFromSpec(spec: string, env: NodeJS.ProcessEnv = process.env): OpenAIPolicyOptions {
  const m = SPEC.exec(spec);
  if (!m)
    throw new PolicySpecError(
      `policy "${spec}": expected openai:MODEL@BASE_URL, e.g. openai:qwen2.5-7b@http://127.0.0.1:8000/v1`,
    );
  const num = (name: string, check: (n: number) => boolean) => {
    const raw = env[`AGENT_R1_OPENAI_${name}`];
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!check(n)) throw new PolicySpecError(`AGENT_R1_OPENAI_${name}="${raw}" is not valid`);
    return n;
  };
  const nonNeg = (n: number) => Number.isFinite(n) && n >= 0;
  const posInt = (n: number) => Number.isInteger(n) && n > 0;
  const options: OpenAIPolicyOptions = { model: m[1]!, baseURL: m[2]! };
  const apiKey = env.AGENT_R1_OPENAI_API_KEY || env.OPENAI_API_KEY;
  if (apiKey) options.apiKey = apiKey;
  const set = <K extends keyof OpenAIPolicyOptions>(k: K, v: OpenAIPolicyOptions[K] | undefined) => {
    if (v !== undefined) options[k] = v;
  };
  set('temperature', num('TEMPERATURE', nonNeg));
  set(
    'topP',
    num('TOP_P', (n) => n > 0 && n <= 1),
  );
  set('concurrency', num('CONCURRENCY', posInt));
  set('timeoutMs', num('TIMEOUT_MS', posInt));
  set(
    'maxRetries',
    num('MAX_RETRIES', (n) => Number.isInteger(n) && n >= 0),
  );
  const lp = env.AGENT_R1_OPENAI_LOGPROBS;
  if (lp !== undefined && lp !== '') set('logprobs', !['0', 'false', 'no'].includes(lp.toLowerCase()));
  return options;
}

export function openAIPolicyFromSpec(spec: string, env: NodeJS.ProcessEnv = process.env): OpenAIPolicy {
  return new OpenAIPolicy(openAIOptionsFromSpec(spec, env));
}
