import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { boundedServer, readBody, type ConnectionLimits } from '../core/http.ts';
import { z } from 'zod';
import { UsageError } from '../core/errors.ts';
import type { BatchQueueStats } from '../rollout/batch-queue.ts';
import { ChatCompletions, unknownModel, type ChatCompletionsOptions } from './completions.ts';
import { EPISODE_HEADER, type EpisodeGateway } from './episode-gateway.ts';
import { OpenAIHttpError, ServerFailureError } from './errors.ts';
import {
  chatCompletionRequestSchema,
  type ChatCompletion,
  type ChatCompletionRequest,
  type FinishReason,
} from './wire.ts';

/**
 * What the server answers with: a policy (ChatCompletionsOptions), or a recording gateway, which
 * adds episodes (requests with the x-agent-r1-episode header) and their rewards.
 */
export type ChatServerOptions = ServerOptions & (ChatCompletionsOptions | { gateway: EpisodeGateway });

interface ServerOptions {
  /** When set, every /v1 request needs `Authorization: Bearer <apiKey>`. An empty key is refused. */
  apiKey?: string;
  /** Request bodies over this many bytes get 413 (default 4 MiB). */
  maxBodyBytes?: number;
  /** Connections at once and request deadlines (default DEFAULT_CONNECTION_LIMITS). */
  limits?: ConnectionLimits;
  /** Called once per finished request (for the CLI's log); never with bodies. */
  onRequest?: (entry: RequestLogEntry) => void;
}

export interface RequestLogEntry {
  method: string;
  path: string;
  status: number;
  ms: number;
  promptTokens?: number;
  completionTokens?: number;
  /** Why the server failed on the request (a 500): for the server's log, never sent to the client. */
  error?: string;
}

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * An OpenAI-compatible HTTP server for a token policy: `POST /v1/chat/completions` (plain and
 * streamed), `GET /v1/models`. The completions themselves are ChatCompletions' (completions.ts);
 * this is the HTTP around them. Every failure is answered with an OpenAI error object; nothing a
 * client sends can crash the process.
 */
export class ChatServer {
  readonly http: Server;
  private readonly completions: ChatCompletions | null;
  private readonly gateway: EpisodeGateway | null;
  private readonly modelName: string;
  private readonly maxBodyBytes: number;
  private readonly keyHash: Buffer | undefined;
  /** Bound to a loopback address: requests must be addressed to it (see checkOrigin). */
  private loopback = true;

  constructor(private readonly options: ChatServerOptions) {
    // An empty key would be a lock that every request opens (or, read as "no key", no lock at all).
    if (options.apiKey === '') throw new UsageError('the API key is empty: give a key, or none for no authentication');
    this.gateway = 'gateway' in options ? options.gateway : null;
    this.completions = 'gateway' in options ? null : new ChatCompletions(options);
    this.modelName = 'gateway' in options ? options.gateway.modelName : options.modelName;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.keyHash = options.apiKey === undefined ? undefined : sha256(options.apiKey);
    this.http = boundedServer((req, res) => void this.handle(req, res), options.limits);
  }

  listen(port = 0, host = '127.0.0.1'): Promise<string> {
    this.loopback = LOOPBACK.has(host);
    return new Promise((resolve, reject) => {
      this.http.once('error', reject);
      this.http.listen(port, host, () => {
        this.http.off('error', reject);
        resolve(this.url);
      });
    });
  }

  /** The base URL clients use (`http://host:port/v1`). */
  get url(): string {
    const a = this.http.address() as AddressInfo;
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host}:${a.port}/v1`;
  }

  async close(): Promise<void> {
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
    this.completions?.close();
  }

  /** The batch queue's counters (a gateway's change with its policy: none). */
  stats(): BatchQueueStats | null {
    return this.completions?.stats() ?? null;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const path = (req.url ?? '/').split('?')[0]!;
    const log: RequestLogEntry = { method: req.method ?? '?', path, status: 0, ms: 0 };
    // A client that goes away mid-request must not take the process with it.
    req.on('error', () => {});
    res.on('error', () => {});
    res.on('finish', () => {
      this.options.onRequest?.({ ...log, status: res.statusCode, ms: performance.now() - started });
    });
    try {
      this.checkOrigin(req);
      this.authorize(req);
      if (path === '/v1/models' || path === '/v1/models/' + encodeURIComponent(this.modelName)) {
        allow(req, 'GET');
        const model = { id: this.modelName, object: 'model', created: 0, owned_by: 'agent-r1' };
        sendJson(res, 200, path === '/v1/models' ? { object: 'list', data: [model] } : model);
        return;
      }
      if (path.startsWith('/v1/models/')) {
        throw unknownModel(safeDecode(path.slice('/v1/models/'.length)), this.modelName);
      }
      const reward = /^\/v1\/episodes\/([^/]+)\/reward$/.exec(path);
      if (reward && this.gateway) {
        allow(req, 'POST');
        const record = await this.gateway.reward(safeDecode(reward[1]!), await this.readBodyJson(req));
        sendJson(res, 200, {
          episode_id: record.episodeId,
          index: record.index,
          turns: record.turns.length,
          total_reward: record.totalReward,
          checksum: record.checksum,
        });
        return;
      }
      if (path !== '/v1/chat/completions') {
        const served = `this server serves GET /v1/models and POST /v1/chat/completions${this.gateway ? ' and POST /v1/episodes/ID/reward' : ''}`;
        const message = `unknown URL ${req.method} ${path}; ${served}`;
        throw new OpenAIHttpError(404, message, 'invalid_request_error', 'unknown_url');
      }
      allow(req, 'POST');
      const body = await this.readJson(req);
      const completion = await this.answer(req, body);
      log.promptTokens = completion.usage.prompt_tokens;
      log.completionTokens = completion.usage.completion_tokens;
      if (body.stream) sendStream(res, completion, body.stream_options?.include_usage === true);
      else sendJson(res, 200, completion);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      const error =
        err instanceof OpenAIHttpError ? err : new ServerFailureError('internal error', why, 'internal_error');
      if (error instanceof ServerFailureError) log.error = error.detail;
      if (!res.headersSent) sendJson(res, error.status, error.body());
      else res.end();
      // The rest of a refused body is read and dropped, so the client gets the answer, not a reset.
      req.resume();
    }
  }

  /**
   * DNS rebinding and cross-site requests. Bound to loopback (the default), a request must name a
   * loopback host, so a page whose name was re-pointed at 127.0.0.1 is refused (421). Whatever the
   * binding, a browser's cross-origin request carries an Origin other than the Host it is sent to:
   * refused (403), even the "simple" text/plain POSTs that browsers send without asking first.
   * Clients that are not browsers send no Origin. Bound to another address (--host), the Host is not
   * checked: that address was chosen to be reached by other names.
   */
  private checkOrigin(req: IncomingMessage): void {
    const host = req.headers.host ?? '';
    if (this.loopback && !LOOPBACK.has(hostname(host))) {
      const message = `this server answers only requests to localhost, not to "${host}"`;
      throw new OpenAIHttpError(421, message, 'invalid_request_error', 'misdirected_request');
    }
    const origin = req.headers.origin;
    if (origin === undefined) return;
    let from: string | undefined;
    try {
      from = new URL(origin).host;
    } catch {
      from = undefined;
    }
    if (from !== host) {
      const message = `cross-origin requests are refused (Origin ${origin}, Host ${host})`;
      throw new OpenAIHttpError(403, message, 'invalid_request_error', 'cross_origin');
    }
  }

  private authorize(req: IncomingMessage): void {
    if (!this.keyHash) return;
    const header = req.headers.authorization;
    // The auth scheme is case-insensitive (RFC 7235): "bearer KEY" is as good as "Bearer KEY".
    const given = typeof header === 'string' ? /^bearer[ \t]+(.*)$/i.exec(header)?.[1]?.trim() : undefined;
    const refuse = (message: string) => new OpenAIHttpError(401, message, 'invalid_request_error', 'invalid_api_key');
    if (given === undefined) throw refuse('missing API key: send the header "Authorization: Bearer <key>"');
    if (!timingSafeEqual(sha256(given), this.keyHash)) throw refuse('incorrect API key provided');
  }

  /** A completion: a turn of the episode the request names, or (no episode) a plain one. */
  private answer(req: IncomingMessage, body: ChatCompletionRequest): Promise<ChatCompletion> {
    const episode = req.headers[EPISODE_HEADER];
    if (episode === undefined) return this.gateway ? this.gateway.complete(body) : this.completions!.complete(body);
    if (!this.gateway) {
      const message = `this server does not record episodes (the ${EPISODE_HEADER} header): start it with --record DIR`;
      throw new OpenAIHttpError(400, message, 'invalid_request_error', 'not_recording');
    }
    // Node joins a header given twice with ", ", which no episode id holds: refused as a bad id.
    return this.gateway.completeTurn(String(episode), body);
  }

  private async readBodyJson(req: IncomingMessage): Promise<unknown> {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > this.maxBodyBytes) throw tooLarge(this.maxBodyBytes);
    const raw = await readBody(req, this.maxBodyBytes, () => tooLarge(this.maxBodyBytes));
    try {
      return JSON.parse(raw.toString('utf8'));
    } catch (err) {
      const message = `the request body is not valid JSON: ${(err as Error).message}`;
      throw new OpenAIHttpError(400, message, 'invalid_request_error', 'invalid_json');
    }
  }

  private async readJson(req: IncomingMessage): Promise<ChatCompletionRequest> {
    const json = await this.readBodyJson(req);
    const parsed = chatCompletionRequestSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const param = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : null;
      const message = `invalid request: ${z.prettifyError(parsed.error)}`;
      throw new OpenAIHttpError(400, message, 'invalid_request_error', 'invalid_request', param);
    }
    return parsed.data;
  }
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** The host name of a Host header (`[::1]:8000` → `[::1]`, `localhost:80` → `localhost`). */
function hostname(host: string): string {
  return host.replace(/:\d*$/, '').toLowerCase();
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function allow(req: IncomingMessage, method: string): void {
  if (req.method === method) return;
  const message = `${req.method} is not allowed here; use ${method}`;
  throw new OpenAIHttpError(405, message, 'invalid_request_error', 'method_not_allowed');
}

function tooLarge(limit: number): OpenAIHttpError {
  const message = `the request body is over the limit of ${limit} bytes`;
  return new OpenAIHttpError(413, message, 'invalid_request_error', 'request_too_large');
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * A finished completion as server-sent events in the chat.completion.chunk shape: the role, the
 * content in pieces, each tool call (name, then arguments), the finish reason, the usage when asked,
 * then `[DONE]`. Generation is batched, so the chunks are sent when the completion is done.
 */
function sendStream(res: ServerResponse, completion: ChatCompletion, includeUsage: boolean): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const choice = completion.choices[0]!;
  const base = {
    id: completion.id,
    object: 'chat.completion.chunk',
    created: completion.created,
    model: completion.model,
    system_fingerprint: completion.system_fingerprint,
  };
  const send = (delta: object, finish: FinishReason | null = null, logprobs: object | null = null) => {
    const choices = [{ index: 0, delta, logprobs, finish_reason: finish }];
    res.write(`data: ${JSON.stringify({ ...base, choices })}\n\n`);
  };
  send({ role: 'assistant', content: '' });
  const content = [...(choice.message.content ?? '')];
  for (let i = 0; i < content.length; i += 16) send({ content: content.slice(i, i + 16).join('') });
  (choice.message.tool_calls ?? []).forEach((call, index) => {
    const name = call.function.name;
    send({ tool_calls: [{ index, id: call.id, type: 'function', function: { name, arguments: '' } }] });
    send({ tool_calls: [{ index, function: { arguments: call.function.arguments } }] });
  });
  send({}, choice.finish_reason, choice.logprobs);
  if (includeUsage) res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: completion.usage })}\n\n`);
  res.end('data: [DONE]\n\n');
}
