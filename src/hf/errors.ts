import { AgentR1Error, UsageError } from '../core/errors.ts';

/**
 * A Hugging Face model folder that cannot be used as it is: a missing file, a tokenizer.json that is
 * not one, a chat template that does not parse or that raised. Names the file and, where there is
 * one, the field.
 */
export class HfFolderError extends AgentR1Error {
  constructor(
    readonly file: string,
    readonly field: string | null,
    readonly problem: string,
  ) {
    super(`${file}${field === null ? '' : ` (${field})`}: ${problem}`);
  }
}

/** A chat template that raised (`raise_exception`) or failed while rendering these messages. */
export class ChatTemplateError extends AgentR1Error {
  constructor(
    readonly file: string,
    readonly problem: string,
  ) {
    super(`the chat template of ${file} ${problem}`);
  }
}

/**
 * An export whose output path is, holds, or lies inside a folder or file the export reads: writing
 * there (or replacing it with --force) would destroy the model being exported. A usage error.
 */
export class ExportOverwritesInputError extends UsageError {
  constructor(
    readonly out: string,
    readonly input: string,
    readonly relation: 'is' | 'contains' | 'is inside',
  ) {
    super(`--out ${out} ${relation} ${input}, which the export reads from; choose an --out outside it`);
  }
}
