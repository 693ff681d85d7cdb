import { AgentR1Error } from '../core/errors.ts';

/** The `type` field of an OpenAI error object. */
export type OpenAIErrorType = 'invalid_request_error' | 'authentication_error' | 'not_found_error' | 'server_error';

/** The JSON body of an OpenAI-style error response. */
export interface OpenAIErrorBody {
  error: { message: string; type: OpenAIErrorType; param: string | null; code: string | null };
}

/**
 * A request the OpenAI-compatible server refuses, with the status code and error object that the
 * OpenAI API would send for it (clients such as the `openai` package map these to their own errors).
 */
export class OpenAIHttpError extends AgentR1Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: OpenAIErrorType = 'invalid_request_error',
    readonly code: string | null = null,
    readonly param: string | null = null,
  ) {
    super(message);
  }

  body(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/**
 * A request the server failed on (500): the client is told what failed, not why, since the cause
 * may name the server's files (a model file that became unreadable); `detail` is for the server's
 * own log.
 */
export class ServerFailureError extends OpenAIHttpError {
  constructor(
    what: string,
    readonly detail: string,
    code: string,
  ) {
    super(500, `${what}; the server's log says why`, 'server_error', code);
  }
}

/** An external OpenAI-compatible endpoint failed for good (after retries), or answered with something unusable. */
export class ExternalPolicyError extends AgentR1Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** A `openai:MODEL@BASE_URL` policy spec that cannot be read. */
export class PolicySpecError extends AgentR1Error {}
