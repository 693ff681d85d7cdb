import type { Redis, RedisOptions } from 'ioredis';
import { QueueDatabaseError, QueueUnavailableError, QueueUrlError } from './errors.ts';
import { queueLibraries } from './libraries.ts';

/** The oldest Redis the queue runs on: BullMQ needs 5; results are written with XADD NOMKSTREAM (6.2). */
export const MIN_REDIS_VERSION = [6, 2, 0] as const;

/** Connection settings from redis://[user:password@]host[:port][/db] (rediss:// for TLS). */
export function parseRedisUrl(url: string): RedisOptions {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new QueueUrlError(url);
  }
  const tls = parsed.protocol === 'rediss:';
  if ((parsed.protocol !== 'redis:' && !tls) || !parsed.hostname) throw new QueueUrlError(url);
  const db = parsed.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d+$/.test(db)) throw new QueueUrlError(url);
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: parsed.port ? Number(parsed.port) : 6379,
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(db ? { db: Number(db) } : {}),
    ...(tls ? { tls: {} } : {}),
  };
}

/** The URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.href.replace(/\/$/, '');
  } catch {
    return url;
  }
}

export interface ConnectOptions {
  /** How long the first connection may take (ms; default 5000). */
  timeoutMs?: number;
  /**
   * Commands fail at once while the connection is down, instead of waiting in ioredis's offline
   * queue: the caller decides how long to wait for Redis (the coordinator), rather than hanging.
   */
  failFast?: boolean;
}

/**
 * A connected client, or a QueueUnavailableError saying why not (refused, timed out, too old a
 * Redis). Once connected, the client reconnects by itself after a drop.
 */
export async function connectRedis(url: string, options: ConnectOptions = {}): Promise<Redis> {
  const settings = parseRedisUrl(url);
  const { ioredis } = await queueLibraries();
  const client = new ioredis.Redis({
    ...settings,
    lazyConnect: true,
    connectTimeout: options.timeoutMs ?? 5000,
    // Reconnect every ≤ 1 s: a restarted Redis is found again within a second.
    retryStrategy: (times) => Math.min(times * 100, 1000),
    ...(options.failFast ? { maxRetriesPerRequest: 0, enableOfflineQueue: false } : { maxRetriesPerRequest: null }),
  });
  // Errors after the first connection surface in the commands that fail; ioredis also emits them here.
  let first: unknown;
  const onError = (err: unknown) => {
    first ??= err;
  };
  client.on('error', onError);
  try {
    await client.connect();
    await checkVersion(client);
    // ioredis selects the database on connect but, refused, goes on in database 0: ask again, loudly.
    if (settings.db) await selectDatabase(client, url, settings.db);
  } catch (err) {
    client.disconnect();
    if (err instanceof QueueDatabaseError) throw err;
    // connect() rejects with "Connection is closed"; the socket's own error says why.
    throw new QueueUnavailableError(redactUrl(url), reasonOf(first ?? err));
  } finally {
    client.off('error', onError);
  }
  client.on('error', () => {});
  return client;
}

async function selectDatabase(client: Redis, url: string, db: number): Promise<void> {
  try {
    await client.select(db);
  } catch (err) {
    throw new QueueDatabaseError(redactUrl(url), db, reasonOf(err));
  }
}

async function checkVersion(client: Redis): Promise<void> {
  const info = await client.info('server');
  const version = /redis_version:([\d.]+)/.exec(info)?.[1] ?? '0';
  const parts = version.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const have = parts[i] ?? 0;
    const need = MIN_REDIS_VERSION[i];
    if (have > need) return;
    if (have < need)
      throw new Error(`Redis ${version} is too old: the queue needs ${MIN_REDIS_VERSION.join('.')} or later`);
  }
}

/** A one-line reason from a connection error (ioredis wraps some in AggregateError). */
export function reasonOf(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return reasonOf(err.errors[0]);
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const message = err.message.split('\n')[0]!;
    return code && !message.includes(code) ? `${code}: ${message}` : message;
  }
  return String(err);
}

/** Whether an error means the connection to Redis is down (so waiting may help), not a failed command. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as NodeJS.ErrnoException).code ?? '';
  return (
    /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)$/.test(code) ||
    /Connection is closed|Stream isn't writeable|enableOfflineQueue|max retries per request|Command timed out|LOADING/i.test(
      err.message,
    )
  );
}
