import WebSocket from 'ws';
import { EnvConnectionError, EnvServerError } from './errors.ts';
import type { EnvAction, EnvState, EnvStepResult, ResetArgs } from './protocol.ts';

export interface EnvClientOptions {
  /** Sent as `Authorization: Bearer <apiKey>` (servers started with --api-key). */
  apiKey?: string;
  /** How long a call waits for its answer (default 60 s). */
  timeoutMs?: number;
  /** How long connecting may take (default 10 s). */
  connectTimeoutMs?: number;
}

interface Pending {
  resolve(value: { type: string; data: unknown }): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * One session with an environment server (ours, or any OpenEnv server) over its WebSocket. Calls
 * are answered in order; a server error rejects the call with EnvServerError (its OpenEnv code in
 * `code`) and the session stays usable.
 */
export class EnvClient {
  private readonly pending: Pending[] = [];
  /** An error the server sent unasked (capacity, idle reaping): the next call fails with it. */
  private unsolicited: EnvServerError | undefined;
  private closedWith: Error | undefined;

  constructor(
    private readonly ws: WebSocket,
    private readonly timeoutMs: number,
  ) {
    ws.on('message', (raw) => this.receive(raw));
    ws.on('close', (code, reason) => {
      const why = this.unsolicited ?? new EnvConnectionError(closeText(code, reason.toString()));
      this.closedWith = why;
      for (const p of this.pending.splice(0)) {
        clearTimeout(p.timer);
        p.reject(why);
      }
    });
    ws.on('error', () => {});
  }

  /** Starts an episode (seed, split, task, sample, group, episode_id, policy, policy_version). */
  async reset(args: ResetArgs = {}): Promise<EnvStepResult> {
    return (await this.call('reset', args, 'observation')) as EnvStepResult;
  }

  /** Plays one action: raw model text, or {text}, {tool_calls}, {answer}. */
  async step(action: EnvAction | string): Promise<EnvStepResult> {
    const data = typeof action === 'string' ? { text: action } : action;
    return (await this.call('step', data, 'observation')) as EnvStepResult;
  }

  async state(): Promise<EnvState> {
    return (await this.call('state', undefined, 'state')) as EnvState;
  }

  /** Ends the session (an episode under way is recorded as ended by the close) and closes the socket. */
  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ type: 'close' }));
      await new Promise<void>((resolve) => {
        this.ws.once('close', () => resolve());
        this.ws.close(1000);
      });
    }
  }

  /** Sends a message as is and waits for the next answer (for clients of other message types, and tests). */
  raw(message: string): Promise<{ type: string; data: unknown }> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    if (this.unsolicited) {
      const err = this.unsolicited;
      this.unsolicited = undefined;
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const at = this.pending.findIndex((p) => p.timer === timer);
        if (at >= 0) this.pending.splice(at, 1);
        reject(new EnvConnectionError(`no answer within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.pending.push({ resolve, reject, timer });
      this.ws.send(message);
    });
  }

  private async call(type: string, data: unknown, expect: string): Promise<unknown> {
    const answer = await this.raw(JSON.stringify(data === undefined ? { type } : { type, data }));
    if (answer.type === 'error') throw serverError(answer.data);
    if (answer.type !== expect)
      throw new EnvConnectionError(`expected a ${expect} message, got ${JSON.stringify(answer.type)}`);
    return answer.data;
  }

  private receive(raw: WebSocket.RawData): void {
    let message: { type: string; data: unknown };
    try {
      message = JSON.parse(raw.toString()) as { type: string; data: unknown };
    } catch {
      return;
    }
    const next = this.pending.shift();
    if (next) {
      clearTimeout(next.timer);
      next.resolve(message);
    } else if (message.type === 'error') this.unsolicited = serverError(message.data);
  }
}

function serverError(data: unknown): EnvServerError {
  const d = (data ?? {}) as { message?: unknown; code?: unknown };
  const { message: _m, code: _c, ...rest } = d as Record<string, unknown>;
  return new EnvServerError(
    typeof d.code === 'string' ? d.code : 'UNKNOWN',
    typeof d.message === 'string' ? d.message : 'Unknown error',
    rest,
  );
}

function closeText(code: number, reason: string): string {
  return `the connection closed (${code}${reason ? ` ${reason}` : ''})`;
}

/** The WebSocket URL for a server's base URL: http(s) → ws(s), and /ws appended unless present. */
export function envSocketUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new EnvConnectionError(`"${url}" is not a URL (expected e.g. http://127.0.0.1:8010)`);
  }
  if (u.protocol === 'http:') u.protocol = 'ws:';
  else if (u.protocol === 'https:') u.protocol = 'wss:';
  else if (u.protocol !== 'ws:' && u.protocol !== 'wss:')
    throw new EnvConnectionError(`"${url}" is not an http(s) or ws(s) URL`);
  if (!u.pathname.endsWith('/ws')) u.pathname = `${u.pathname.replace(/\/+$/, '')}/ws`;
  return u.toString();
}

/** Opens a session with the environment server at `url` (http://host:port or ws://host:port/ws). */
export function connectEnv(url: string, options: EnvClientOptions = {}): Promise<EnvClient> {
  return new Promise((resolve, reject) => {
    // Inside the executor, so a bad URL rejects like every other failure.
    const target = envSocketUrl(url);
    const ws = new WebSocket(target, {
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
      handshakeTimeout: options.connectTimeoutMs ?? 10_000,
      perMessageDeflate: false,
    });
    const fail = (err: Error) => reject(new EnvConnectionError(`cannot connect to ${target}: ${err.message}`));
    ws.once('error', fail);
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => {
        let detail = body;
        try {
          detail = (JSON.parse(body) as { detail?: string }).detail ?? body;
        } catch {
          // not JSON: the text as is
        }
        ws.terminate();
        reject(new EnvConnectionError(`cannot connect to ${target}: ${res.statusCode} ${detail}`.trim()));
      });
    });
    ws.once('open', () => {
      ws.off('error', fail);
      resolve(new EnvClient(ws, options.timeoutMs ?? 60_000));
    });
  });
}
