import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import type { PolicyOutput } from '../core/types.ts';
import { parseAction } from '../parse/parse-action.ts';
import { chatEncoding } from '../policy/tfjs/chat-template.ts';
import type { SamplingOptions } from '../policy/tfjs/generate.ts';
import { BatchQueue, type BatchQueueStats } from '../rollout/batch-queue.ts';
import type { Policy } from '../policy/policy.ts';
import { ChatBridge } from './chat-bridge.ts';
import { OpenAIHttpError } from './errors.ts';
import { actionToAssistant } from './messages.ts';
import { ServingPolicy, type ServablePolicy } from './serving-policy.ts';
import { chatCompletionRequestSchema, normalizeMessages, type AssistantMessage, type ChatCompletion, type ChatCompletionRequest, type FinishReason } from './wire.ts';

export interface ChatServerOptions {
  policy: ServablePolicy;
  /** The model id clients ask for (GET /v1/models lists it). */
  modelName: string;
  /** When set, every /v1 request needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Request bodies over this many bytes get 413 (default 4 MiB). */
  maxBodyBytes?: number;
  /** Policy-server batching: most rows in one generation batch, and how long a row waits for company. */
  maxBatch?: number;
  maxWaitMs?: number;
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
}

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * An OpenAI-compatible HTTP server for a token policy: `POST /v1/chat/completions` (plain and
 * streamed), `GET /v1/models`. Conversations are read into the policy's own chat template
 * (ChatBridge); generation goes through the same batch queue as rollouts, so concurrent
 * requests are merged into batches. Every failure is answered with an
 * OpenAI error object; nothing a client sends can crash the process.
 */
export class ChatServer {
  readonly http: Server;
  private readonly serving: ServingPolicy;
  private readonly queue: BatchQueue;
  private readonly batched: Policy;
  private readonly bridge: ChatBridge;
  private readonly maxBodyBytes: number;
  private readonly stopTokens: Set<number>;
  private readonly keyHash: Buffer | undefined;
  private nextRow = 0;

  constructor(private readonly options: ChatServerOptions) {
    const { policy } = options;
    const template = chatEncoding(policy.tokenizer);
    this.bridge = new ChatBridge(template);
    this.serving = new ServingPolicy(policy);
    this.queue = new BatchQueue(this.serving, { maxBatch: options.maxBatch ?? 32, maxWaitMs: options.maxWaitMs ?? 10 });
    this.batched = this.queue.direct();
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    const t = policy.tokenizer;
    this.stopTokens = new Set([t.special('</tool_call>'), t.special('</answer>'), t.special('<|end|>'), t.eos]);
    this.keyHash = options.apiKey === undefined ? undefined : sha256(options.apiKey);
    this.http = createServer((req, res) => void this.handle(req, res));
  }

  listen(port = 0, host = '127.0.0.1'): Promise<string> {
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
    this.queue.close();
  }

  stats(): BatchQueueStats {
    return this.queue.stats();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const path = (req.url ?? '/').split('?')[0]!;
    const log: RequestLogEntry = { method: req.method ?? '?', path, status: 0, ms: 0 };
    // A client that goes away mid-request must not take the process with it.
    req.on('error', () => {});
    res.on('error', () => {});
    res.on('finish', () => this.options.onRequest?.({ ...log, status: res.statusCode, ms: performance.now() - started }));
    try {
      this.authorize(req);
      if (path === '/v1/models' || path === '/v1/models/' + encodeURIComponent(this.options.modelName)) {
        allow(req, 'GET');
        const model = { id: this.options.modelName, object: 'model', created: 0, owned_by: 'agent-r1' };
        sendJson(res, 200, path === '/v1/models' ? { object: 'list', data: [model] } : model);
        return;
      }
      if (path.startsWith('/v1/models/')) throw unknownModel(safeDecode(path.slice('/v1/models/'.length)), this.options.modelName);
      if (path !== '/v1/chat/completions') throw new OpenAIHttpError(404, `unknown URL ${req.method} ${path}; this server serves GET /v1/models and POST /v1/chat/completions`, 'invalid_request_error', 'unknown_url');
      allow(req, 'POST');
      const body = await this.readJson(req);
      const completion = await this.complete(body, log);
      if (body.stream) sendStream(res, completion, body.stream_options?.include_usage === true);
      else sendJson(res, 200, completion);
    } catch (err) {
      const error =
        err instanceof OpenAIHttpError ? err : new OpenAIHttpError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`, 'server_error', 'internal_error');
      if (!res.headersSent) sendJson(res, error.status, error.body());
      else res.end();
      // The rest of a refused body is read and dropped, so the client gets the answer, not a reset.
      req.resume();
    }
  }

  private authorize(req: IncomingMessage): void {
    if (!this.keyHash) return;
    const header = req.headers.authorization;
    const given = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : undefined;
    if (given === undefined) {
      throw new OpenAIHttpError(401, 'missing API key: send the header "Authorization: Bearer <key>"', 'invalid_request_error', 'invalid_api_key');
    }
    if (!timingSafeEqual(sha256(given), this.keyHash)) throw new OpenAIHttpError(401, 'incorrect API key provided', 'invalid_request_error', 'invalid_api_key');
  }

  private async readJson(req: IncomingMessage): Promise<ChatCompletionRequest> {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > this.maxBodyBytes) throw tooLarge(this.maxBodyBytes);
    const raw = await readBody(req, this.maxBodyBytes);
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new OpenAIHttpError(400, `the request body is not valid JSON: ${(err as Error).message}`, 'invalid_request_error', 'invalid_json');
    }
    const parsed = chatCompletionRequestSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const param = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : null;
      throw new OpenAIHttpError(400, `invalid request: ${z.prettifyError(parsed.error)}`, 'invalid_request_error', 'invalid_request', param);
    }
    return parsed.data;
  }

  /** One chat completion: the conversation in the template, one generation row, the answer in OpenAI shape. */
  private async complete(body: ChatCompletionRequest, log: RequestLogEntry): Promise<ChatCompletion> {
    const { policy, modelName } = this.options;
    if (body.model !== modelName) throw unknownModel(body.model, modelName);
    const prompt = this.bridge.render(normalizeMessages(body.messages));
    const context = policy.model.config.contextLength;
    if (prompt.length > context) {
      throw new OpenAIHttpError(400, `the conversation is ${prompt.length} tokens; this model's context is ${context} tokens`, 'invalid_request_error', 'context_length_exceeded', 'messages');
    }
    const maxTokens = Math.min(body.max_completion_tokens ?? body.max_tokens ?? Infinity, context - prompt.length + 1);
    const rowId = `chatcmpl-${randomBytes(12).toString('hex')}`;
    this.serving.configure(rowId, sampling(policy.sampling, body));
    let output: PolicyOutput;
    try {
      output = await this.batched.act({
        episodeId: rowId,
        task: { id: rowId, split: '', question: '' },
        tools: [],
        messages: [],
        tokens: prompt,
        turn: 0,
        seed: body.seed ?? randomInt(2 ** 31 - 1),
        maxTokens,
      });
    } catch (err) {
      throw new OpenAIHttpError(500, `generation failed: ${err instanceof Error ? err.message : String(err)}`, 'server_error', 'generation_failed');
    } finally {
      this.batched.release!(rowId);
    }
    let tokens = output.tokens ?? policy.tokenizer.encode(output.text);
    let logprobs = output.logprobs ?? [];
    let text = output.text;
    let finish: FinishReason = this.stopTokens.has(tokens.at(-1) ?? -1) ? 'stop' : 'length';
    const cut = cutAtStop(text, body.stop);
    if (cut !== null) {
      // The text ends before the stop string; the tokens end with the one that completed it.
      let k = 1;
      while (k < tokens.length && policy.tokenizer.decode(tokens.slice(0, k)).length < cut + 1) k++;
      tokens = tokens.slice(0, k);
      logprobs = logprobs.slice(0, k);
      text = text.slice(0, cut);
      finish = 'stop';
    }
    // As with the OpenAI API, tool calls are returned as tool_calls only when the request offers tools.
    const structured = (body.tools?.length ?? 0) > 0 && body.tool_choice !== 'none';
    const message: AssistantMessage = structured ? actionToAssistant(text, (i) => `call_${rowId.slice(9, 25)}_${i}`) : { role: 'assistant', content: text };
    if (message.tool_calls && parseAction(text).kind === 'tool_calls') finish = 'tool_calls';
    this.bridge.remember(message, tokens);
    log.promptTokens = prompt.length;
    log.completionTokens = tokens.length;
    const tok = policy.tokenizer;
    return {
      id: rowId,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: modelName,
      system_fingerprint: `fp_${policy.version.slice(0, 12)}`,
      choices: [
        {
          index: 0,
          message: { ...message, refusal: null },
          finish_reason: finish,
          logprobs: body.logprobs
            ? {
                content: tokens.map((id, i) => ({
                  token: body.return_tokens_as_token_ids ? `token_id:${id}` : tok.tokenText(id),
                  logprob: logprobs[i] ?? 0,
                  bytes: [...tok.bytes([id])],
                  top_logprobs: [],
                })),
                refusal: null,
              }
            : null,
          token_ids: tokens,
        },
      ],
      usage: { prompt_tokens: prompt.length, completion_tokens: tokens.length, total_tokens: prompt.length + tokens.length },
    };
  }
}

/** The request's sampling on top of the policy's own: temperature and top_p replace the checkpoint's when given. */
function sampling(own: SamplingOptions, body: ChatCompletionRequest): SamplingOptions {
  const out: SamplingOptions = { ...own };
  if (body.temperature !== undefined && body.temperature !== null) out.temperature = body.temperature;
  if (body.top_p !== undefined && body.top_p !== null) out.topP = body.top_p;
  return out;
}

/** Where the text is cut by the first stop string (OpenAI semantics: the stop string is not returned). */
export function cutAtStop(text: string, stop: string | string[] | null | undefined): number | null {
  const stops = (typeof stop === 'string' ? [stop] : (stop ?? [])).filter((s) => s !== '');
  let cut: number | null = null;
  for (const s of stops) {
    const at = text.indexOf(s);
    if (at >= 0 && (cut === null || at < cut)) cut = at;
  }
  return cut;
}

/**
 * The body, up to a limit. Past the limit the rest is still read (and dropped) rather than the
 * socket reset, so the client receives the 413.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        reject(tooLarge(limit));
      } else chunks.push(chunk);
    });
    req.on('end', () => {
      if (!over) resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
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
  if (req.method !== method) throw new OpenAIHttpError(405, `${req.method} is not allowed here; use ${method}`, 'invalid_request_error', 'method_not_allowed');
}

function unknownModel(asked: string, served: string): OpenAIHttpError {
  return new OpenAIHttpError(400, `the model "${asked}" does not exist; this server serves "${served}"`, 'invalid_request_error', 'model_not_found', 'model');
}

function tooLarge(limit: number): OpenAIHttpError {
  return new OpenAIHttpError(413, `the request body is over the limit of ${limit} bytes`, 'invalid_request_error', 'request_too_large');
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
  const base = { id: completion.id, object: 'chat.completion.chunk', created: completion.created, model: completion.model, system_fingerprint: completion.system_fingerprint };
  const send = (delta: object, finish: FinishReason | null = null, logprobs: object | null = null) =>
    res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, logprobs, finish_reason: finish }] })}\n\n`);
  send({ role: 'assistant', content: '' });
  const content = [...(choice.message.content ?? '')];
  for (let i = 0; i < content.length; i += 16) send({ content: content.slice(i, i + 16).join('') });
  (choice.message.tool_calls ?? []).forEach((call, index) => {
    send({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] });
    send({ tool_calls: [{ index, function: { arguments: call.function.arguments } }] });
  });
  send({}, choice.finish_reason, choice.logprobs);
  if (includeUsage) res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: completion.usage })}\n\n`);
  res.end('data: [DONE]\n\n');
}
