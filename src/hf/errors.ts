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

/**
 * A tokenizer.json with more vocabulary entries, merges or added tokens than MAX_TOKENIZER_ENTRIES:
 * refused from its counts, before it is parsed (from its text) or built.
 */
export class TokenizerSizeError extends HfFolderError {
  constructor(
    file: string,
    field: string,
    readonly count: number,
    readonly limit: number,
    /** Counted from the text, which was read no further than the limit: `count` is a lower bound. */
    readonly atLeast = false,
  ) {
    const holds = `${atLeast ? 'at least ' : ''}${count}`;
    super(file, field, `holds ${holds} entries; the most is ${limit} (MAX_TOKENIZER_ENTRIES, a model's most rows)`);
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

/**
 * A render that ran past its budget (MAX_TEMPLATE_OPERATIONS operations or TEMPLATE_DEADLINE_MS
 * milliseconds): a template that never ends, or one too slow for this many messages and tools.
 */
export class TemplateBudgetError extends ChatTemplateError {
  constructor(
    file: string,
    readonly unit: 'operations' | 'milliseconds',
    readonly budget: number,
  ) {
    const limit = unit === 'operations' ? 'MAX_TEMPLATE_OPERATIONS' : 'TEMPLATE_DEADLINE_MS';
    super(
      file,
      `ran past its budget of ${budget} ${unit} (${limit}) and was stopped: a template that never ends, or too many messages or tools for it`,
    );
  }
}
