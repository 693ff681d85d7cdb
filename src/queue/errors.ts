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
