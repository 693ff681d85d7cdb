import { AgentR1Error } from '../core/errors.ts';

/**
 * A model file that is not what it claims to be: a truncated safetensors file, a header that asks
 * for more than the file holds, a dtype that cannot be read. Names the file and the field, so the
 * fix is clear from the one line.
 */
export class ModelFileError extends AgentR1Error {
  constructor(
    readonly file: string,
    readonly field: string | null,
    readonly problem: string,
  ) {
    super(`${file}${field === null ? '' : ` (${field})`}: ${problem}`);
  }
}
