import { AgentR1Error, UsageError } from '../core/errors.ts';

/** A queue address that is not a redis:// or rediss:// URL. The CLI exits 2. */
export class QueueUrlError extends UsageError {
  constructor(readonly url: string) {
    super(`--queue expects redis://HOST:PORT (or rediss://, with an optional user:password@ and /DB), got "${url}"`);
  }
}

/** Redis cannot be reached (at start), or was lost for longer than the run waits for it. */
export class QueueUnavailableError extends AgentR1Error {
  constructor(
    readonly url: string,
    readonly reason: string,
    what = 'cannot reach the queue',
  ) {
    super(`${what} at ${url}: ${reason}`);
  }
}

/** A run that cannot finish on the queue for a reason that is not an episode's (a worker that cannot set up). */
export class QueueRunError extends AgentR1Error {}

/** A job a worker will not play (jobs come from whoever can write to Redis): every problem, on one line. */
export class MalformedJobError extends AgentR1Error {}

/** A Redis server that refuses the database the queue URL names (`redis://…/99` on a server of 16). The CLI exits 2. */
export class QueueDatabaseError extends UsageError {
  constructor(
    readonly url: string,
    readonly db: number,
    readonly reason: string,
  ) {
    super(`the queue at ${url} names database ${db}, which the Redis server refuses (${reason})`);
  }
}
