import { AgentR1Error } from '../core/errors.ts';

/** A run directory the viewer or the report cannot read (missing, empty, malformed files). */
export class RunDirError extends AgentR1Error {}

/** A bad request to the viewer (unknown run or episode, malformed query). The status is the HTTP one. */
export class ViewRequestError extends AgentR1Error {
  constructor(
    message: string,
    readonly status: 400 | 404 | 405 = 400,
  ) {
    super(message);
  }
}

/** The viewer could not start listening (port in use, bad address). */
export class ViewerStartError extends AgentR1Error {}
