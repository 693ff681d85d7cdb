import { createHash } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { dirname, join } from 'node:path';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { canonicalJson } from '../core/canonical-json.ts';
import { MAX_ARGUMENT_DEPTH, nestsDeeperThan } from '../core/json-depth.ts';
import {
  ApiKeyCheck,
  boundedServer,
  hostRefusal,
  jsonContentRefusal,
  originRefusal,
  readBody,
  type ConnectionLimits,
} from '../core/http.ts';
import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import { openAITools } from '../episode/drive-episode.ts';
import { episodeConfig } from '../episode/run-episode.ts';
import { RecordWriter } from '../record/jsonl.ts';
import { serializeRecord } from '../record/record.ts';
import { canWrite } from '../core/writable-dir.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { EnvProtocolError, EnvServerStartError, RecordWriteError } from './errors.ts';
import { CLIENT_MESSAGE_TYPES, envJsonSchemas, stepRequestSchema, validate, type EnvErrorCode } from './protocol.ts';
import { EnvSession, type SessionContext } from './session.ts';
import { TaskPicker } from './task-picker.ts';

export interface EnvServerOptions {
  scenario: Scenario;
  /** Overrides of the scenario's episode budgets. */
  config?: Partial<EpisodeConfig>;
  /** Sessions at once, WebSocket and stateless HTTP together (default 64); more get CAPACITY_REACHED. */
  maxSessions?: number;
  /** Connections at once and request deadlines (default DEFAULT_CONNECTION_LIMITS). */
  limits?: ConnectionLimits;
  /** A session without a message for this long is closed, its episode recorded (default 10 min; 0: never). */
  idleTimeoutMs?: number;
  /** When set, everything but /health needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Bodies and WebSocket messages over this many bytes are refused (default 1 MiB). */
  maxMessageBytes?: number;
  /** Appends every episode's record to DIR/episodes.jsonl. */
  recordDir?: string;
  /** Told every sealed record (tests and benchmarks keep them in memory). */
  onRecord?(record: EpisodeRecord): void;
  /** One line per notable event (sessions opened and closed, episodes ended); never bodies. */
  onLog?(line: string): void;
}

export const DEFAULT_ENV_PORT = 8010;
export const DEFAULT_MAX_SESSIONS = 64;
export const DEFAULT_IDLE_TIMEOUT_MS = 10 * 60_000;
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;
/** Messages a client may have waiting for answers on one connection. */
const MAX_QUEUED = 16;

interface Connection {
  ws: WebSocket;
  session: EnvSession;
  queued: number;
  chain: Promise<void>;
  lastActivity: number;
  dropped: boolean;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/**
 * A scenario served over OpenEnv's protocol (meta-pytorch/OpenEnv `core/env_server/http_server.py`):
 * WebSocket /ws, one session per connection, messages reset / step / state / close; GET /health,
 * /metadata, /schema, /state; stateless POST /reset and /step. Each session plays episodes with the
 * client as the policy (ServedEpisode), and every episode becomes an ordinary record.
 */
export class EnvServer {
  readonly http: Server;
  readonly runId: string;
  private readonly wss: WebSocketServer;
  private readonly connections = new Set<Connection>();
  private readonly sessions = new Set<EnvSession>();
  private readonly ctx: SessionContext;
  private readonly maxSessions: number;
  private readonly idleTimeoutMs: number;
  private readonly maxMessageBytes: number;
  private readonly keyCheck: ApiKeyCheck | undefined;
  private readonly writer: RecordWriter | undefined;
  private readonly recordPath: string | undefined;
  private metadata: Promise<object> | undefined;
  /** Set when a record could not be written: no new episode starts until a write of its size succeeds. */
  private blocked: { reason: string; bytes: number; probedAt: number } | undefined;
  private reaper: NodeJS.Timeout | undefined;
  private host = '127.0.0.1';
  private closing = false;
  /** Records written (or handed to onRecord) since the server started. */
  recorded = 0;

  constructor(private readonly options: EnvServerOptions) {
    const { scenario } = options;
    this.maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    if (!Number.isInteger(this.maxSessions) || this.maxSessions < 1)
      throw new EnvServerStartError(`maxSessions must be a positive integer, got ${this.maxSessions}`);
    this.keyCheck = options.apiKey ? new ApiKeyCheck(options.apiKey) : undefined;
    const config = episodeConfig(scenario, options.config);
    // Equal servers give equal run ids, so equal sessions give equal records.
    const key = canonicalJson({ scenario: [scenario.id, scenario.version, scenario.options], config });
    this.runId = `env-${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
    if (options.recordDir) {
      this.recordPath = join(options.recordDir, 'episodes.jsonl');
      this.writer = new RecordWriter(this.recordPath, { append: true });
      const torn = this.writer.repaired;
      if (torn)
        this.log(
          `${this.recordPath} ended in a torn line (${torn.bytes} bytes, never acknowledged): set aside in ${torn.savedTo}`,
        );
    }
    this.ctx = {
      scenario,
      tasks: new TaskPicker(scenario),
      config: options.config ?? {},
      runId: this.runId,
      onRecord: (record) => this.keep(record),
      admit: () => this.admit(),
    };
    // The hard cap is above the soft one, so an oversized message gets an error message and the
    // session goes on; only a far larger one closes the connection (1009).
    this.wss = new WebSocketServer({ noServer: true, maxPayload: 4 * this.maxMessageBytes, perMessageDeflate: false });
    this.http = boundedServer(
      (req, res) => void this.handle(req, res),
      options.limits,
      (req: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(req, socket, head),
    );
  }

  listen(port = DEFAULT_ENV_PORT, host = '127.0.0.1'): Promise<string> {
    this.host = host;
    return new Promise((resolve, reject) => {
      this.http.once('error', (err: NodeJS.ErrnoException) => {
        const why =
          err.code === 'EADDRINUSE'
            ? `port ${port} is in use (--port 0 picks a free one)`
            : err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND'
              ? `address ${host} is not available here`
              : err.message;
        reject(new EnvServerStartError(`the environment server cannot listen on ${host}:${port}: ${why}`));
      });
      this.http.listen(port, host, () => {
        if (this.idleTimeoutMs > 0) {
          this.reaper = setInterval(() => this.reap(), Math.max(10, Math.min(this.idleTimeoutMs / 4, 5000)));
          this.reaper.unref();
        }
        resolve(this.url);
      });
    });
  }

  /** The base URL (`http://127.0.0.1:8010`); the WebSocket is at `ws://…/ws`. */
  get url(): string {
    const a = this.http.address() as AddressInfo;
    const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
    return `http://${host}:${a.port}`;
  }

  get activeSessions(): number {
    return this.sessions.size;
  }

  /** Where records go, when they go to a file. */
  get recordFile(): string | undefined {
    return this.recordPath;
  }

  /** Stops: every session's episode under way is recorded (ended by the shutdown), then the sockets close. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearInterval(this.reaper);
    const reason = 'the server shut down before the episode ended';
    await Promise.all(
      [...this.connections].map(async (conn) => {
        await this.drop(conn, reason);
        conn.ws.close(1001, 'server shutting down');
      }),
    );
    await Promise.all([...this.sessions].map((s) => s.close(reason)));
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
    this.writer?.close();
  }

  /**
   * Writes an ended episode's record before its client hears that it ended (a client may read the
   * file next, and only a written record is acknowledged). A failed write throws RecordWriteError,
   * which that client hears instead, and stops new episodes until a write can succeed (admit).
   */
  private keep(record: EpisodeRecord): void {
    if (this.writer) {
      try {
        this.writer.write(record);
        this.writer.flush();
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        this.blocked = { reason, bytes: serializeRecord(record).length + 1, probedAt: Date.now() };
        this.log(`cannot write the record of ${record.episodeId}: ${reason}; no new episodes until it can write`);
        throw new RecordWriteError(record.episodeId, reason);
      }
      if (this.blocked) this.unblock();
    }
    this.recorded++;
    this.options.onRecord?.(record);
    this.log(
      `episode ${record.episodeId} ended: ${record.endReason}, reward ${record.totalReward}${record.error ? ` (${record.error})` : ''}`,
    );
  }

  /** Refuses a new episode while records cannot be written; tries a write of a record's size at most every 250 ms. */
  private admit(): void {
    const blocked = this.blocked;
    if (!blocked) return;
    if (Date.now() - blocked.probedAt >= 250 && this.recordPath) {
      blocked.probedAt = Date.now();
      if (canWrite(dirname(this.recordPath), blocked.bytes)) {
        this.unblock();
        return;
      }
    }
    throw new EnvProtocolError(
      'SESSION_ERROR',
      `the server cannot write its records (${blocked.reason}): it takes no new episodes until it can`,
      { recording: false },
      503,
    );
  }

  private unblock(): void {
    this.blocked = undefined;
    this.log('records can be written again: new episodes are taken');
  }

  private log(line: string): void {
    this.options.onLog?.(line);
  }

  // ---- HTTP ----

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.on('error', () => {});
    res.on('error', () => {});
    const path = (req.url ?? '/').split('?')[0]!;
    try {
      const wrongHost = hostRefusal(this.host, req.headers.host);
      if (wrongHost) throw new HttpError(421, wrongHost);
      // The same rule as /ws: a web page cannot make this server play (and record) episodes.
      const crossSite = originRefusal(this.host, req.headers.origin);
      if (crossSite) throw new HttpError(403, crossSite);
      if (path === '/health') {
        allow(req, 'GET');
        return sendJson(res, 200, { status: 'healthy' });
      }
      this.authorize(req);
      switch (path) {
        case '/metadata':
          allow(req, 'GET');
          return sendJson(res, 200, await this.describe());
        case '/schema':
          allow(req, 'GET');
          return sendJson(res, 200, envJsonSchemas());
        case '/state':
          // Over HTTP each call is a fresh environment (OpenEnv's semantics): nothing has happened yet.
          allow(req, 'GET');
          return sendJson(res, 200, {
            episode_id: null,
            step_count: 0,
            scenario: this.options.scenario.id,
            episodes: 0,
          });
        case '/reset': {
          allow(req, 'POST');
          const body = await this.readJson(req, true);
          return sendJson(res, 200, await this.stateless('reset', (s) => s.reset(body)));
        }
        case '/step': {
          allow(req, 'POST');
          const body = await this.readJson(req, false);
          const parsed = validate(stepRequestSchema, body, 'step request');
          const { action, timeout_s: _t, request_id: _r, ...reset } = parsed;
          return sendJson(
            res,
            200,
            await this.stateless('step', async (s) => {
              await s.reset(reset);
              return s.step(action);
            }),
          );
        }
        case '/ws':
          throw new HttpError(426, '/ws is the WebSocket endpoint: connect with a WebSocket client', {
            upgrade: 'websocket',
          });
        default:
          throw new HttpError(
            404,
            `nothing at ${req.method} ${path}; this server answers GET /health, /metadata, /schema, /state, POST /reset, /step and WebSocket /ws`,
          );
      }
    } catch (err) {
      if (!res.headersSent) {
        if (err instanceof HttpError) sendJson(res, err.status, { detail: err.message }, err.headers);
        else if (err instanceof EnvProtocolError)
          sendJson(res, err.status, { detail: err.message, code: err.code, ...err.extra });
        else sendJson(res, 500, { detail: `internal error: ${err instanceof Error ? err.message : String(err)}` });
      } else res.end();
      // The rest of a refused body is read and dropped, so the client gets the answer, not a reset.
      req.resume();
    }
  }

  /** One episode for one request: OpenEnv builds a fresh environment per HTTP call and closes it after. */
  private async stateless<T>(what: string, run: (session: EnvSession) => Promise<T>): Promise<T> {
    const session = this.openSession();
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = { value: await run(session) };
    } catch (error) {
      outcome = { error };
    }
    // The episode ends with the request, and is answered only once its record is written.
    let failed: RecordWriteError | undefined;
    try {
      failed = await session.close(`stateless POST /${what}: the episode ends with the request`);
    } finally {
      this.sessions.delete(session);
    }
    if ('error' in outcome) throw outcome.error;
    if (failed) throw new EnvProtocolError('EXECUTION_ERROR', failed.message, { recorded: false }, 503);
    return outcome.value;
  }

  private openSession(): EnvSession {
    if (this.closing) throw new EnvProtocolError('SESSION_ERROR', 'the server is shutting down');
    if (this.sessions.size >= this.maxSessions)
      throw new EnvProtocolError(
        'CAPACITY_REACHED',
        `Server at capacity: ${this.sessions.size}/${this.maxSessions} sessions active. Cannot accept new connections.`,
        { active_sessions: this.sessions.size, max_sessions: this.maxSessions },
      );
    const session = new EnvSession(this.ctx);
    this.sessions.add(session);
    return session;
  }

  private authorize(req: IncomingMessage): void {
    const why = this.keyCheck?.refusal(req.headers.authorization);
    if (why) throw new HttpError(401, why, { 'www-authenticate': 'Bearer' });
  }

  private async readJson(req: IncomingMessage, emptyIsObject: boolean): Promise<unknown> {
    const limit = this.maxMessageBytes;
    const tooLarge = () => new HttpError(413, `the request body is over the limit of ${limit} bytes`);
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) throw tooLarge();
    const body = await readBody(req, limit, tooLarge);
    const wrongType = jsonContentRefusal(req.headers['content-type'], body.length);
    if (wrongType) throw new HttpError(415, wrongType);
    const raw = body.toString('utf8');
    if (raw.trim() === '' && emptyIsObject) return {};
    return parseMessage(raw);
  }

  private describe(): Promise<object> {
    this.metadata ??= (async () => {
      const { scenario } = this.options;
      const tools = openAITools(scenario);
      let systemPrompt: string | null = null;
      try {
        const task = await this.ctx.tasks.pick(this.ctx.tasks.defaultSplit, 0, 0);
        systemPrompt = scenario.env.prompt(task, tools).find((m) => m.role === 'system')?.content ?? null;
      } catch {
        // a scenario whose default split is empty: no sample prompt to show
      }
      return {
        name: scenario.id,
        description: scenario.description,
        version: scenario.version,
        scenario: { id: scenario.id, version: scenario.version, options: scenario.options },
        splits: scenario.splits.map((name) => ({ name, tasks: scenario.taskCount?.(name) ?? null })),
        default_split: this.ctx.tasks.defaultSplit,
        tools,
        system_prompt: systemPrompt,
        episode: episodeConfig(scenario, this.options.config),
        run_id: this.runId,
        max_sessions: this.maxSessions,
        idle_timeout_s: this.idleTimeoutMs / 1000,
        max_message_bytes: this.maxMessageBytes,
        records: this.recordPath ?? null,
      };
    })();
    return this.metadata;
  }

  // ---- WebSocket ----

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    const refusal = this.upgradeRefusal(req);
    if (!refusal) {
      this.wss.handleUpgrade(req, socket, head, (ws) => this.open(ws));
      return;
    }
    const [status, message] = refusal;
    const body = JSON.stringify({ detail: message });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  }

  /** Why a WebSocket handshake is refused (HTTP status and message), or undefined. */
  private upgradeRefusal(req: IncomingMessage): [number, string] | undefined {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/ws') return [404, `no WebSocket at ${path}; connect to /ws`];
    const wrongHost = hostRefusal(this.host, req.headers.host);
    if (wrongHost) return [421, wrongHost];
    const crossSite = originRefusal(this.host, req.headers.origin);
    if (crossSite) return [403, crossSite];
    const why = this.keyCheck?.refusal(req.headers.authorization);
    return why ? [401, why] : undefined;
  }

  private open(ws: WebSocket): void {
    ws.on('error', () => {});
    let session: EnvSession;
    try {
      session = this.openSession();
    } catch (err) {
      // As OpenEnv: the connection is accepted, told why, and closed.
      if (err instanceof EnvProtocolError) send(ws, errorMessage(err.code, err.message, err.extra));
      ws.close(1013, 'server at capacity');
      return;
    }
    const conn: Connection = {
      ws,
      session,
      queued: 0,
      chain: Promise.resolve(),
      lastActivity: Date.now(),
      dropped: false,
    };
    this.connections.add(conn);
    this.log(`session opened (${this.sessions.size}/${this.maxSessions})`);
    ws.on('message', (data) => this.receive(conn, data));
    ws.on('close', () => void this.drop(conn, 'the client disconnected before the episode ended'));
  }

  private receive(conn: Connection, data: RawData): void {
    conn.lastActivity = Date.now();
    if (conn.dropped) return;
    if (conn.queued >= MAX_QUEUED) {
      const message = `over ${MAX_QUEUED} messages are waiting for answers; wait for them before sending more`;
      send(conn.ws, errorMessage('SESSION_ERROR', message));
      return;
    }
    conn.queued++;
    conn.chain = conn.chain
      .then(() => this.answer(conn, data))
      .finally(() => {
        conn.queued--;
        conn.lastActivity = Date.now();
      });
  }

  private async answer(conn: Connection, data: RawData): Promise<void> {
    if (conn.dropped) return;
    try {
      const raw = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer);
      if (raw.length > this.maxMessageBytes)
        throw new EnvProtocolError(
          'VALIDATION_ERROR',
          `the message is ${raw.length} bytes, over the limit of ${this.maxMessageBytes}`,
        );
      const message = parseMessage(raw.toString('utf8'));
      if (!isObject(message))
        throw new EnvProtocolError('VALIDATION_ERROR', 'a message is a JSON object {"type": …, "data": {…}}');
      const type = message.type;
      if (typeof type !== 'string' || !(CLIENT_MESSAGE_TYPES as readonly string[]).includes(type))
        throw new EnvProtocolError(
          'UNKNOWN_TYPE',
          `Unknown message type: ${typeof type === 'string' ? type : JSON.stringify(type ?? null)}; this server answers ${CLIENT_MESSAGE_TYPES.join(', ')}`,
        );
      const extra = Object.keys(message).filter((k) => k !== 'type' && k !== 'data');
      if (extra.length > 0)
        throw new EnvProtocolError(
          'VALIDATION_ERROR',
          `unknown message fields: ${extra.join(', ')} (a message is {type, data})`,
        );
      const payload = message.data;
      if (payload !== undefined && payload !== null && !isObject(payload))
        throw new EnvProtocolError('VALIDATION_ERROR', 'data must be a JSON object');
      const { session } = conn;
      switch (type) {
        case 'reset':
          send(conn.ws, { type: 'observation', data: await session.reset(payload ?? {}) });
          return;
        case 'step':
          if (payload === undefined || payload === null)
            throw new EnvProtocolError('VALIDATION_ERROR', 'a step needs data: the action');
          send(conn.ws, { type: 'observation', data: await session.step(payload) });
          return;
        case 'state':
          send(conn.ws, { type: 'state', data: session.state() });
          return;
        case 'close':
          await this.drop(conn, 'the client closed the session before the episode ended');
          conn.ws.close(1000, 'closed');
          return;
      }
    } catch (err) {
      if (err instanceof EnvProtocolError) send(conn.ws, errorMessage(err.code, err.message, err.extra));
      else send(conn.ws, errorMessage('EXECUTION_ERROR', err instanceof Error ? err.message : String(err)));
    }
  }

  /** Ends a connection's session: its episode under way is recorded as ended by `reason`. */
  private async drop(conn: Connection, reason: string): Promise<void> {
    if (conn.dropped) return;
    conn.dropped = true;
    this.connections.delete(conn);
    try {
      await conn.session.close(reason);
    } finally {
      this.sessions.delete(conn.session);
      this.log(`session closed: ${reason.replace(/ before the episode ended$/, '')}`);
    }
  }

  private reap(): void {
    const now = Date.now();
    for (const conn of this.connections) {
      if (conn.queued > 0 || now - conn.lastActivity <= this.idleTimeoutMs) continue;
      const seconds = this.idleTimeoutMs / 1000;
      const message = `the session was idle for over ${seconds} s and is closed (its episode is recorded)`;
      send(conn.ws, errorMessage('SESSION_ERROR', message));
      void this.drop(conn, `the session was idle for over ${seconds} s`).then(() => conn.ws.close(1000, 'idle'));
    }
  }
}

/** The deepest a request body or message may nest: tool-call arguments at their limit, and the envelope around them. */
const MAX_MESSAGE_DEPTH = MAX_ARGUMENT_DEPTH + 8;

/** A body or message as JSON: INVALID_JSON when it is not, VALIDATION_ERROR when it nests too deep to validate. */
function parseMessage(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new EnvProtocolError('INVALID_JSON', `Invalid JSON: ${(err as Error).message}`);
  }
  if (nestsDeeperThan(value, MAX_MESSAGE_DEPTH))
    throw new EnvProtocolError(
      'VALIDATION_ERROR',
      `the message nests deeper than ${MAX_MESSAGE_DEPTH} levels (tool-call arguments may nest ${MAX_ARGUMENT_DEPTH})`,
    );
  return value;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function errorMessage(code: EnvErrorCode, message: string, extra: { [key: string]: unknown } = {}) {
  return { type: 'error', data: { message, code, ...extra } };
}

function send(ws: WebSocket, value: unknown): void {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(value));
}

function allow(req: IncomingMessage, method: string): void {
  if (req.method === method || (method === 'GET' && req.method === 'HEAD')) return;
  throw new HttpError(405, `${req.method} is not allowed here; use ${method}`, { allow: method });
}

function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
