import { AgentR1Error } from '../core/errors.ts';

/**
 * A model configuration this build cannot run: an unknown architecture, a rope scaling it does not
 * implement, sizes past the limits. Names the file and the field.
 */
export class ModelConfigError extends AgentR1Error {
  constructor(
    readonly file: string,
    readonly field: string | null,
    readonly problem: string,
  ) {
    super(`${file}${field === null ? '' : ` (${field})`}: ${problem}`);
  }
}

/** A prompt longer than the model's context: nothing can be generated after it. */
export class PromptTooLongError extends AgentR1Error {
  constructor(
    readonly promptTokens: number,
    readonly contextLength: number,
  ) {
    super(`the prompt is ${promptTokens} tokens; this model's context is ${contextLength} tokens (shorten the prompt)`);
  }
}
