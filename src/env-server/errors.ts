import { AgentR1Error } from '../core/errors.ts';

/** OpenEnv's WebSocket error codes (WSErrorCode). */
export const ENV_ERROR_CODES = [
  'INVALID_JSON',
  'UNKNOWN_TYPE',
  'VALIDATION_ERROR',
  'EXECUTION_ERROR',
  'CAPACITY_REACHED',
  'FACTORY_ERROR',
  'SESSION_ERROR',
] as const;

export type EnvErrorCode = (typeof ENV_ERROR_CODES)[number];

/**
 * A request the environment server refuses, with OpenEnv's error code; over /ws it becomes
 * `{"type": "error", "data": {message, code, ...extra}}` and the session stays usable.
 */
export class EnvProtocolError extends AgentR1Error {
  constructor(
    readonly code: EnvErrorCode,
    message: string,
    readonly extra: { [key: string]: unknown } = {},
    /** The HTTP status, where the code's usual one says less (503 for a server that cannot record). */
    private readonly httpStatus?: number,
  ) {
    super(message);
  }

  /** The HTTP status for the stateless endpoints (FastAPI's 422 for validation, as OpenEnv answers). */
  get status(): number {
    if (this.httpStatus !== undefined) return this.httpStatus;
    if (this.code === 'INVALID_JSON' || this.code === 'VALIDATION_ERROR') return 422;
    if (this.code === 'CAPACITY_REACHED') return 503;
    if (this.code === 'EXECUTION_ERROR') return 409;
    return 500;
  }
}

/**
 * An episode's record could not be written (a full disk): the episode is not recorded, and the client
 * that ended it is told so instead of an observation. `reason` is the system's (`ENOSPC: …`).
 */
export class RecordWriteError extends AgentR1Error {
  constructor(
    readonly episodeId: string,
    readonly reason: string,
  ) {
    super(
      `the episode ${episodeId} ended, but its record could not be written (${reason}): it is not recorded, ` +
        'and the server takes no new episodes until it can write',
    );
  }
}

/** Why the episode the client was playing ended without it (disconnect, reset, idle reaping, shutdown). */
export class EpisodeAbandonedError extends AgentR1Error {}

/** What the TypeScript client raises when the server answers with an error message. */
export class EnvServerError extends AgentR1Error {
  constructor(
    readonly code: string,
    message: string,
    readonly data: { [key: string]: unknown } = {},
  ) {
    super(`${message} (${code})`);
  }
}

/** The client's connection is gone (closed by either side, or never opened). */
export class EnvConnectionError extends AgentR1Error {}

/** The environment server could not start (port in use, bad options). */
export class EnvServerStartError extends AgentR1Error {}
