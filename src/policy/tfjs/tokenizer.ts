import { AgentR1Error } from '../../core/errors.ts';

/**
 * A byte-level BPE tokenizer with reserved special tokens, trained on a scenario's text.
 *
 * Written here rather than taken from npm: the maintained pure-JS tokenizers (@huggingface/tokenizers,
 * js-tiktoken, gpt-tokenizer) only load and apply existing vocabularies; training needs the native
 * Rust bindings. A byte-level BPE trainer is small, and owning it makes training deterministic
 * (ties broken by pair ids) and lets encode/decode round-trip every JS string exactly, lone
 * surrogates included (bytes are WTF-8).
 *
 * Ids: [0, specials) special tokens, then the 256 bytes, then one id per merge, in merge order.
 * Text is pre-split into chunks and merges never cross a chunk. Two chunkings: `words` splits
 * letters-only words, single digits, punctuation runs and whitespace runs apart, so a word is the
 * same tokens wherever it stands (after a space, a quote, a newline or `>`) and can be copied token
 * for token from a document into a search or an answer; `space-words` (GPT-2 style, the default)
 * keeps a word's leading space and trailing punctuation with it, which makes sequences ~35% shorter
 * where nothing needs copying but digits (always single tokens). Markup specials (`<tool_call>`,
 * `</answer>`, …) are matched in text and decode to themselves; control specials (`<|…|>`: pad, eos, roles, end)
 * are only ever inserted by the chat template, are never matched in text and decode to "", so
 * decode(encode(s)) === s for every string s.
 */
export const SPECIAL_TOKENS = [
  '<|pad|>',
  '<|eos|>',
  '<|system|>',
  '<|user|>',
  '<|assistant|>',
  '<|tool|>',
  '<|end|>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<answer>',
  '</answer>',
  '<think>',
  '</think>',
] as const;

export class TokenizerError extends AgentR1Error {}

/** Bounds of a vocabulary's token bytes (real BPE tokens are a few to a few dozen bytes). */
const MAX_TOKEN_BYTES = 1 << 16;
const MAX_VOCABULARY_BYTES = 1 << 26;

export interface TokenizerJSON {
  kind: 'byte-bpe';
  version: 1;
  /** Pre-tokenization (absent: `space-words`, the first version's). */
  chunking?: Chunking;
  specials: string[];
  /** Merges in order, each a pair of ids; merge i creates id specials.length + 256 + i. */
  merges: Array<[number, number]>;
}

// Single digits (numbers are copied digit by digit, and unseen numbers stay learnable), words with
// an optional leading space, punctuation runs with an optional leading space, whitespace.
const CHUNKS = {
  'space-words': /\p{N}| ?[^\s\p{N}]+|\s+(?!\S)|\s+/gu,
  words: /\p{N}|\p{L}+|[^\s\p{L}\p{N}]+|\s+/gu,
} as const;
export type Chunking = keyof typeof CHUNKS;
export const CHUNKINGS = Object.keys(CHUNKS) as Chunking[];

export class Tokenizer {
  readonly specials: readonly string[];
  readonly merges: ReadonlyArray<readonly [number, number]>;
  readonly vocabSize: number;
  /** The most bytes of text one token stands for: text of n bytes is at least n / maxTokenBytes tokens. */
  readonly maxTokenBytes: number;
  readonly chunking: Chunking;
  private readonly rank = new Map<number, number>();
  private readonly bytesOf: Uint8Array[] = [];
  private readonly specialIds = new Map<string, number>();
  private readonly specialPattern: RegExp | null;
  private readonly cache = new Map<string, number[]>();

  constructor(json: TokenizerJSON) {
    if (
      json?.kind !== 'byte-bpe' ||
      json.version !== 1 ||
      !Array.isArray(json.specials) ||
      !Array.isArray(json.merges)
    ) {
      throw new TokenizerError('not a byte-bpe tokenizer (expected {kind: "byte-bpe", version: 1, specials, merges})');
    }
    if (json.chunking !== undefined && !(CHUNKINGS as string[]).includes(json.chunking)) {
      throw new TokenizerError(`unknown chunking "${json.chunking}"; valid: ${CHUNKINGS.join(', ')}`);
    }
    this.chunking = json.chunking ?? 'space-words';
    this.specials = json.specials.slice();
    this.merges = json.merges.map(([a, b]) => [a, b] as const);
    const base = this.specials.length;
    this.specials.forEach((s, i) => {
      if (typeof s !== 'string' || s.length === 0)
        throw new TokenizerError(`special token ${i} must be a non-empty string`);
      if (this.specialIds.has(s)) throw new TokenizerError(`duplicate special token ${s}`);
      this.specialIds.set(s, i);
      this.bytesOf.push(isControl(s) ? new Uint8Array(0) : wtf8Encode(s));
    });
    for (let b = 0; b < 256; b++) this.bytesOf.push(Uint8Array.of(b));
    // A merge's token is its two parts' bytes: merging a token with itself doubles it, so a tokenizer
    // from a checkpoint (untrusted) could ask for 2^merges bytes. Bounded before each allocation.
    let total = 0;
    this.merges.forEach(([a, b], i) => {
      const id = base + 256 + i;
      if (!(Number.isInteger(a) && Number.isInteger(b) && a >= base && b >= base && a < id && b < id)) {
        throw new TokenizerError(`merge ${i} [${a}, ${b}] must join two earlier non-special ids`);
      }
      this.rank.set(pairKey(a, b), i);
      const length = this.bytesOf[a]!.length + this.bytesOf[b]!.length;
      total += length;
      if (length > MAX_TOKEN_BYTES || total > MAX_VOCABULARY_BYTES) {
        throw new TokenizerError(
          `merge ${i} makes the vocabulary too large (a token of ${length} bytes; ${total} in all; ` +
            `the most are ${MAX_TOKEN_BYTES} and ${MAX_VOCABULARY_BYTES})`,
        );
      }
      const joined = new Uint8Array(length);
      joined.set(this.bytesOf[a]!);
      joined.set(this.bytesOf[b]!, this.bytesOf[a]!.length);
      this.bytesOf.push(joined);
    });
    this.vocabSize = this.bytesOf.length;
    this.maxTokenBytes = this.bytesOf.reduce((m, t) => Math.max(m, t.length), 1);
    this.specialPattern = markupPattern(this.specials);
  }

  /** The id of a special token (throws on an unknown name). */
  special(name: string): number {
    const id = this.specialIds.get(name);
    if (id === undefined) throw new TokenizerError(`unknown special token ${name}`);
    return id;
  }

  get eos(): number {
    return this.special('<|eos|>');
  }

  get pad(): number {
    return this.special('<|pad|>');
  }

  /** Encodes text; occurrences of special-token strings become their special ids. */
  encode(text: string): number[] {
    if (typeof text !== 'string') throw new TokenizerError(`encode expects a string, got ${typeof text}`);
    const out: number[] = [];
    let last = 0;
    if (!this.specialPattern) return this.encodeOrdinary(text, out);
    for (const m of text.matchAll(this.specialPattern)) {
      this.encodeOrdinary(text.slice(last, m.index), out);
      out.push(this.specialIds.get(m[0])!);
      last = m.index! + m[0].length;
    }
    this.encodeOrdinary(text.slice(last), out);
    return out;
  }

  /** Encodes text with no special-token matching (e.g. user content that must stay literal). */
  encodeOrdinary(text: string, out: number[] = []): number[] {
    for (const chunk of splitChunks(text, CHUNKS[this.chunking])) {
      let ids = this.cache.get(chunk);
      if (!ids) {
        ids = this.bpe(wtf8Encode(chunk));
        if (this.cache.size > 50_000) this.cache.clear();
        this.cache.set(chunk, ids);
      }
      for (const id of ids) out.push(id);
    }
    return out;
  }

  decode(ids: readonly number[]): string {
    return wtf8Decode(this.bytes(ids));
  }

  /** The raw bytes of a token sequence (a generated sequence may cut a character in half). */
  bytes(ids: readonly number[]): Uint8Array {
    let n = 0;
    for (const id of ids) {
      const b = this.bytesOf[id];
      if (b === undefined)
        throw new TokenizerError(`token id ${id} is outside the vocabulary (size ${this.vocabSize})`);
      n += b.length;
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const id of ids) {
      out.set(this.bytesOf[id]!, at);
      at += this.bytesOf[id]!.length;
    }
    return out;
  }

  /** The text of one token (for debugging and vocabulary listings). */
  tokenText(id: number): string {
    return this.decode([id]);
  }

  toJSON(): TokenizerJSON {
    return {
      kind: 'byte-bpe',
      version: 1,
      ...(this.chunking === 'space-words' ? {} : { chunking: this.chunking }),
      specials: [...this.specials],
      merges: this.merges.map(([a, b]) => [a, b]),
    };
  }

  private bpe(bytes: Uint8Array): number[] {
    const base = this.specials.length;
    let ids = Array.from(bytes, (b) => b + base);
    while (ids.length > 1) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < ids.length; i++) {
        const r = this.rank.get(pairKey(ids[i]!, ids[i + 1]!));
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          best = i;
        }
      }
      if (best < 0) break;
      const merged = base + 256 + bestRank;
      const [a, b] = this.merges[bestRank]!;
      const next: number[] = [];
      for (let i = 0; i < ids.length; i++) {
        if (i + 1 < ids.length && ids[i] === a && ids[i + 1] === b) {
          next.push(merged);
          i++;
        } else next.push(ids[i]!);
      }
      ids = next;
    }
    return ids;
  }
}

export interface TrainTokenizerOptions {
  /** Target vocabulary size including specials and the 256 bytes. */
  vocabSize: number;
  specials?: readonly string[];
  /** Pairs seen fewer times than this are not merged. */
  minFrequency?: number;
  /** Pre-tokenization (default `space-words`, the shorter one; `words` for models that copy names). */
  chunking?: Chunking;
}

/** Trains a byte-level BPE on texts. Deterministic: the same texts give the same merges. */
export function trainTokenizer(texts: Iterable<string>, options: TrainTokenizerOptions): Tokenizer {
  const specials = [...(options.specials ?? SPECIAL_TOKENS)];
  const base = specials.length;
  if (!Number.isInteger(options.vocabSize) || options.vocabSize < base + 256) {
    throw new TokenizerError(
      `vocabSize must be an integer ≥ ${base + 256} (specials + 256 bytes), got ${options.vocabSize}`,
    );
  }
  const minFrequency = options.minFrequency ?? 2;
  const chunking = options.chunking ?? 'space-words';
  if (!(CHUNKINGS as string[]).includes(chunking))
    throw new TokenizerError(`unknown chunking "${chunking}"; valid: ${CHUNKINGS.join(', ')}`);
  const specialPattern = markupPattern(specials);
  const counts = new Map<string, number>();
  for (const text of texts) {
    for (const piece of specialPattern ? text.split(specialPattern) : [text]) {
      for (const chunk of splitChunks(piece, CHUNKS[chunking])) counts.set(chunk, (counts.get(chunk) ?? 0) + 1);
    }
  }
  // Words as id arrays with their counts, in a fixed order.
  const words = [...counts.entries()]
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))
    .map(([chunk, count]) => ({ ids: Array.from(wtf8Encode(chunk), (b) => b + base), count }));
  const merges: Array<[number, number]> = [];
  const maxMerges = options.vocabSize - base - 256;
  while (merges.length < maxMerges) {
    const pairs = new Map<number, number>();
    for (const w of words) {
      for (let i = 0; i + 1 < w.ids.length; i++) {
        const k = pairKey(w.ids[i]!, w.ids[i + 1]!);
        pairs.set(k, (pairs.get(k) ?? 0) + w.count);
      }
    }
    let bestKey = -1;
    let bestCount = 0;
    for (const [k, c] of pairs) {
      if (c > bestCount || (c === bestCount && k < bestKey)) {
        bestKey = k;
        bestCount = c;
      }
    }
    if (bestKey < 0 || bestCount < minFrequency) break;
    const a = Math.floor(bestKey / PAIR_BASE);
    const b = bestKey % PAIR_BASE;
    const id = base + 256 + merges.length;
    merges.push([a, b]);
    for (const w of words) {
      if (w.ids.length < 2) continue;
      const next: number[] = [];
      for (let i = 0; i < w.ids.length; i++) {
        if (i + 1 < w.ids.length && w.ids[i] === a && w.ids[i + 1] === b) {
          next.push(id);
          i++;
        } else next.push(w.ids[i]!);
      }
      w.ids = next;
    }
  }
  return new Tokenizer({
    kind: 'byte-bpe',
    version: 1,
    ...(chunking === 'space-words' ? {} : { chunking }),
    specials,
    merges,
  });
}

/** Control tokens look like `<|name|>`: template-only, decoded as nothing. */
function isControl(special: string): boolean {
  return special.startsWith('<|') && special.endsWith('|>');
}

function markupPattern(specials: readonly string[]): RegExp | null {
  const markup = specials.filter((s) => !isControl(s)).sort((x, y) => y.length - x.length);
  if (markup.length === 0) return null;
  return new RegExp(markup.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
}

const PAIR_BASE = 1 << 20;
function pairKey(a: number, b: number): number {
  return a * PAIR_BASE + b;
}

function splitChunks(text: string, pattern: RegExp): string[] {
  if (text.length === 0) return [];
  const chunks = text.match(pattern) ?? [];
  // The pattern covers every character except lone surrogates; keep them as their own chunks.
  let total = 0;
  for (const c of chunks) total += c.length;
  if (total === text.length) return chunks;
  const out: string[] = [];
  let at = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index! > at) out.push(text.slice(at, m.index));
    out.push(m[0]);
    at = m.index! + m[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}

/** UTF-8 that also encodes lone surrogates (WTF-8), so every JS string has an exact byte form. */
export function wtf8Encode(text: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

/** Inverse of wtf8Encode; bytes that form no character (a model may emit them) become U+FFFD. */
export function wtf8Decode(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  const cont = (k: number) => i + k < bytes.length && (bytes[i + k]! & 0xc0) === 0x80;
  while (i < bytes.length) {
    const b = bytes[i]!;
    let cp = -1;
    let len = 1;
    if (b < 0x80) cp = b;
    else if (b >= 0xc2 && b < 0xe0 && cont(1)) {
      cp = ((b & 31) << 6) | (bytes[i + 1]! & 63);
      len = 2;
    } else if (b >= 0xe0 && b < 0xf0 && cont(1) && cont(2)) {
      cp = ((b & 15) << 12) | ((bytes[i + 1]! & 63) << 6) | (bytes[i + 2]! & 63);
      len = 3;
      if (cp < 0x800) cp = -1;
    } else if (b >= 0xf0 && b < 0xf5 && cont(1) && cont(2) && cont(3)) {
      cp = ((b & 7) << 18) | ((bytes[i + 1]! & 63) << 12) | ((bytes[i + 2]! & 63) << 6) | (bytes[i + 3]! & 63);
      len = 4;
      if (cp < 0x10000 || cp > 0x10ffff) cp = -1;
    }
    if (cp < 0) {
      out += '\ufffd';
      i += 1;
    } else {
      out += String.fromCodePoint(cp);
      i += len;
    }
  }
  return out;
}
