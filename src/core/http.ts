import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Small pieces every HTTP server here needs: bounded bodies, the loopback Host check, API keys.
 * Each server keeps its own error shapes; these only say what is wrong.
 */

/** Host names that mean this machine. */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

export function isLoopback(host: string): boolean {
  return LOOPBACK_HOSTS.has(host);
}

/** The host part of a Host header (`[::1]:8010` → `[::1]`, `localhost:80` → `localhost`). */
export function hostOf(header: string | undefined): string {
  return (header ?? '').replace(/:\d+$/, '');
}

/**
 * Why a request to a server bound to `boundHost` is refused, or undefined. A loopback-bound server
 * answers only requests addressed to a loopback name, so a web page cannot reach it through DNS
 * rebinding; one bound elsewhere relies on its API key.
 */
export function hostRefusal(boundHost: string, hostHeader: string | undefined): string | undefined {
  if (!isLoopback(boundHost)) return undefined;
  const requested = hostOf(hostHeader);
  return isLoopback(requested) ? undefined : `this server answers only on localhost, not "${requested}"`;
}

/** The host of an Origin header, bracketed when it is an IPv6 address (as LOOPBACK_HOSTS has it); '' when unreadable. */
export function originHost(origin: string): string {
  try {
    const host = new URL(origin).hostname;
    return host.startsWith('[') ? host : host.includes(':') ? `[${host}]` : host;
  } catch {
    return '';
  }
}

/**
 * Why a browser's request is refused, or undefined. Browsers send an Origin; scripts and trainers
 * do not. A web page must not drive a loopback-bound server (any request of its, even the "simple"
 * text/plain POST a browser sends without asking first): only pages of this machine may.
 */
export function originRefusal(boundHost: string, origin: string | undefined): string | undefined {
  if (origin === undefined || !isLoopback(boundHost) || isLoopback(originHost(origin))) return undefined;
  return `requests from ${origin} are not allowed (a web page may not drive this server)`;
}

/**
 * Why a request body is refused for its Content-Type, or undefined: a body must be declared JSON
 * (`application/json`, or a `+json` type), which a cross-site form or text/plain post cannot be.
 * An empty body needs no type.
 */
export function jsonContentRefusal(contentType: string | undefined, bodyBytes: number): string | undefined {
  if (bodyBytes === 0 && contentType === undefined) return undefined;
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === 'application/json' || /^application\/[\w.+-]+\+json$/.test(type)) return undefined;
  return `the body must be JSON with "Content-Type: application/json" (got ${contentType === undefined ? 'no Content-Type' : `"${contentType}"`})`;
}

/**
 * The body, up to `limit` bytes. Past the limit the promise rejects with `tooLarge()` and the rest
 * is still read (and dropped) rather than the socket reset, so the client receives the answer.
 */
export function readBody(req: IncomingMessage, limit: number, tooLarge: () => Error): Promise<Buffer> {
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
        reject(tooLarge());
      } else chunks.push(chunk);
    });
    req.on('end', () => {
      if (!over) resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

/** Checks `Authorization: Bearer <key>` in constant time. */
export class ApiKeyCheck {
  private readonly hash: Buffer;

  constructor(key: string) {
    this.hash = sha256(key);
  }

  /** Why the request is refused, or undefined when it carries the key. */
  refusal(authorization: string | string[] | undefined): string | undefined {
    const bearer = typeof authorization === 'string' && authorization.startsWith('Bearer ');
    if (!bearer) return 'missing API key: send the header "Authorization: Bearer <key>"';
    const given = authorization.slice('Bearer '.length).trim();
    return timingSafeEqual(sha256(given), this.hash) ? undefined : 'incorrect API key provided';
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** How much of a server one client may hold: connections at once, and the time to send a request. */
export interface ConnectionLimits {
  /** Open connections at once (WebSocket sessions included); past it a new one is closed at once. */
  maxConnections?: number;
  /** A request's headers must have arrived this long after it began, or after the connection opened. */
  headersTimeoutMs?: number;
  /** Its body too, within this; past it the server answers 408 and closes the connection. */
  requestTimeoutMs?: number;
}

export const DEFAULT_CONNECTION_LIMITS: Required<ConnectionLimits> = {
  maxConnections: 1024,
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 60_000,
};

/**
 * An HTTP server whose clients cannot hold it: a cap on connections, a deadline for headers and
 * one for the whole request (a client trickling its body), and a connection that sends nothing is
 * closed after the headers' deadline (Node's own covers only a request that has begun). An
 * `upgrade` handler (WebSocket) takes its socket out of these deadlines.
 */
export function boundedServer(
  handler: RequestListener,
  limits: ConnectionLimits = {},
  upgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => void,
): Server {
  const { maxConnections, headersTimeoutMs, requestTimeoutMs } = { ...DEFAULT_CONNECTION_LIMITS, ...limits };
  const server = createServer(
    {
      headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, headersTimeoutMs / 2),
    },
    handler,
  );
  server.maxConnections = maxConnections;
  server.on('connection', (socket) => socket.setTimeout(headersTimeoutMs, () => socket.destroy()));
  server.on('request', (req: IncomingMessage) => req.socket.setTimeout(0));
  if (upgrade)
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      (socket as Duplex & { setTimeout(ms: number): void }).setTimeout(0);
      upgrade(req, socket, head);
    });
  return server;
}
