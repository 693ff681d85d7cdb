import { Tokenizer } from '@huggingface/tokenizers';
import { LLAMA_LIMITS } from '../architectures/llama/config.ts';
import { HfFolderError, TokenizerSizeError } from './errors.ts';

/**
 * The most vocabulary entries, merges and added tokens a tokenizer.json may hold: as many as a model
 * may have rows (a tokenizer with more tokens than that serves no model this build loads). They are
 * counted before the tokenizer is built, which takes minutes and gigabytes for ten million entries.
 */
export const MAX_TOKENIZER_ENTRIES = LLAMA_LIMITS.vocabSize;

/** A special token as tokenizer_config.json writes it: a string, or an AddedToken `{content, …}`. */
type TokenValue = string | { content?: unknown } | null | undefined;

/** The special tokens Transformers passes to a chat template by name (those the config sets). */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

/** The lists of a tokenizer.json whose lengths are bounded by MAX_TOKENIZER_ENTRIES. */
const COUNTED = ['model.vocab', 'model.merges', 'added_tokens'];

/**
 * Refuses a tokenizer.json's text whose vocabulary, merges or added tokens are over
 * MAX_TOKENIZER_ENTRIES, from one scan of the text, before it is parsed: JSON.parse alone takes
 * minutes on a ten-million-entry vocabulary (a V8 object that large). The scan stops at the first
 * list past the limit; text that is not JSON is left for JSON.parse to refuse.
 */
export function checkTokenizerCounts(text: string, file: string, limit = MAX_TOKENIZER_ENTRIES): void {
  // One frame per open object or array: its path (`model.vocab`) when every level above it is an
  // object member of the top two levels, else null; and the commas between its items so far.
  const frames: Array<{ object: boolean; path: string | null; commas: number }> = [];
  let key: string | null = null;
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = frames[frames.length - 1];
    if (c === 0x22) {
      // A string: to its closing quote (one not escaped by an odd run of backslashes).
      let end = text.indexOf('"', i + 1);
      for (;;) {
        if (end < 0) return;
        let slashes = 0;
        while (text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++;
        if (slashes % 2 === 0) break;
        end = text.indexOf('"', end + 1);
      }
      if (expectKey) key = frames.length <= 2 ? text.slice(i + 1, end) : null;
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      let path: string | null = null;
      if (!top) path = '';
      else if (top.object && top.path !== null && key !== null) path = top.path ? `${top.path}.${key}` : key;
      frames.push({ object: c === 0x7b, path, commas: 0 });
      expectKey = c === 0x7b;
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
      expectKey = false;
    } else if (c === 0x2c && top) {
      top.commas++;
      expectKey = top.object;
      if (top.commas >= limit && top.path !== null && COUNTED.includes(top.path))
        throw new TokenizerSizeError(file, top.path, top.commas + 1, limit, true);
    } else if (c === 0x3a) expectKey = false;
  }
}

/** One token of the vocabulary that the tokenizer adds to the model's own (tokenizer.json `added_tokens`). */
export interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

/**
 * A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) through @huggingface/tokenizers,
 * a JavaScript implementation of the `tokenizers` library. Text is encoded as Transformers encodes
 * a message rendered by the chat template: special tokens written in the text are parsed as
 * specials, and nothing is added around it (the template writes the BOS where the model wants one).
 */
export class HfTokenizer {
  private readonly impl: Tokenizer;
  /** Ids 0 … vocabSize − 1 may appear (the model's vocabulary may be larger: padding rows). */
  readonly vocabSize: number;
  readonly added: readonly AddedToken[];
  /** The special tokens tokenizer_config.json names (bos_token, eos_token, …), by name. */
  readonly specialTokens: { readonly [name: string]: string };

  constructor(
    readonly tokenizerJson: { [key: string]: unknown },
    readonly tokenizerConfig: { [key: string]: unknown },
    readonly file = 'tokenizer.json',
    /** The model's embedding rows (config.json vocab_size): a tokenizer with more tokens is refused before it is built. */
    rows?: number,
  ) {
    const fail = (field: string | null, problem: string) => new HfFolderError(file, field, problem);
    const model = tokenizerJson.model as { type?: unknown; vocab?: unknown; merges?: unknown } | undefined;
    if (model === null || typeof model !== 'object') throw fail('model', 'is missing');
    if (model.type !== 'BPE')
      throw fail('model.type', `${JSON.stringify(model.type)}: only BPE tokenizers are supported`);
    if (model.vocab === null || typeof model.vocab !== 'object' || Array.isArray(model.vocab))
      throw fail('model.vocab', 'is not an object of token → id');
    const added = tokenizerJson.added_tokens ?? [];
    if (!Array.isArray(added)) throw fail('added_tokens', 'is not a list');
    // The counts first: each is cheap to read, and one too large is refused before any work that grows with it.
    const counts: Array<[field: string, count: number]> = [
      ['model.vocab', Object.keys(model.vocab).length],
      ['model.merges', Array.isArray(model.merges) ? model.merges.length : 0],
      ['added_tokens', added.length],
    ];
    for (const [field, count] of counts)
      if (count > MAX_TOKENIZER_ENTRIES) throw new TokenizerSizeError(file, field, count, MAX_TOKENIZER_ENTRIES);
    this.added = added.map((t, i) => {
      const { id, content, special } = (t ?? {}) as { id?: unknown; content?: unknown; special?: unknown };
      if (!Number.isSafeInteger(id) || (id as number) < 0 || typeof content !== 'string')
        throw fail(`added_tokens[${i}]`, 'needs an integer "id" and a string "content"');
      return { id: id as number, content, special: special === true };
    });
    let max = -1;
    for (const [token, id] of Object.entries(model.vocab)) {
      if (!Number.isSafeInteger(id) || (id as number) < 0)
        throw fail('model.vocab', `token ${JSON.stringify(token)} has id ${id}`);
      if ((id as number) > max) max = id as number;
    }
    for (const t of this.added) if (t.id > max) max = t.id;
    this.vocabSize = max + 1;
    if (rows !== undefined && this.vocabSize > rows)
      throw fail(null, `has ${this.vocabSize} tokens but the model (config.json vocab_size) has ${rows} rows`);
    try {
      this.impl = new Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (error) {
      throw fail(null, `cannot be built into a tokenizer: ${(error as Error).message}`);
    }
    const specials: { [name: string]: string } = {};
    for (const key of SPECIAL_TOKEN_KEYS) {
      const text = tokenText(tokenizerConfig[key] as TokenValue);
      if (text !== null) specials[key] = text;
    }
    this.specialTokens = specials;
  }

  /** The ids of a text, special tokens written in it parsed as specials. */
  encode(text: string): number[] {
    return this.impl.encode(text, { add_special_tokens: false }).ids;
  }

  /** The text of ids, special tokens written out. */
  decode(ids: readonly number[]): string {
    if (ids.length === 0) return '';
    return this.impl.decode(ids as number[], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** A token's id, or undefined when the vocabulary has no such token. */
  tokenId(token: string): number | undefined {
    return this.impl.token_to_id(token);
  }

  /** A token's string (byte-level form for BPE tokens), or undefined. */
  token(id: number): string | undefined {
    return this.impl.id_to_token(id);
  }
}

/** The text of a special token from tokenizer_config.json (null when it is not set). */
export function tokenText(value: TokenValue): string | null {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof value.content === 'string') return value.content;
  return null;
}
