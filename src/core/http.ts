import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

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
