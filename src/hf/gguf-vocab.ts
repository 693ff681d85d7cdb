import type { LlamaConfig } from '../architectures/llama/config.ts';
import type { GgufValue } from '../formats/gguf.ts';
import type { ChatTemplate } from './chat-template.ts';
import { HfFolderError } from './errors.ts';
import { tokenText, type HfTokenizer } from './tokenizer.ts';

/**
 * A byte-level BPE tokenizer (tokenizer.json) as llama.cpp's `gpt2` vocabulary, as
 * convert_hf_to_gguf.py writes it: one token string per row of the model (rows the tokenizer does
 * not use are `[PAD{id}]`, unused), token types (added tokens that are special or look special are
 * control tokens, other added tokens user-defined), the merges as "a b", the pre-tokenizer by the
 * name llama.cpp gives its regexes, the special token ids and the chat template.
 */

const TOKEN_NORMAL = 1;
const TOKEN_CONTROL = 3;
const TOKEN_USER_DEFINED = 4;
const TOKEN_UNUSED = 5;

/** The pre-tokenizer regexes llama.cpp knows, by its name for them. */
const QWEN2_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

type Json = { [key: string]: unknown };

/** llama.cpp's name for the tokenizer's pre-tokenizer, or null when it has none for it. */
export function preTokenizerName(tokenizerJson: Json): string | null {
  const pre = tokenizerJson.pre_tokenizer as Json | null | undefined;
  const parts = (pre?.type === 'Sequence' ? pre.pretokenizers : [pre]) as Json[] | undefined;
  if (!Array.isArray(parts) || parts.length !== 2) return null;
  const [first, second] = parts as [Json, Json];
  if (second?.type !== 'ByteLevel') return null;
  if (first?.type === 'Split' && second.use_regex === false) {
    const regex = (first.pattern as Json | undefined)?.Regex;
    if (regex === QWEN2_REGEX) return 'qwen2';
    if (regex === LLAMA3_REGEX) return 'llama-bpe';
  }
  if (first?.type === 'Digits' && first.individual_digits === true && second.use_regex === true) return 'smollm';
  return null;
}

/** convert_hf_to_gguf.py's does_token_look_special: control tokens by their look. */
function looksSpecial(text: string): boolean {
  return (
    ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(text) ||
    (text.startsWith('<|') && text.endsWith('|>')) ||
    (text.startsWith('<｜') && text.endsWith('｜>')) ||
    (text.startsWith('<unused') && text.endsWith('>'))
  );
}

export function ggufVocabulary(
  tokenizer: HfTokenizer,
  config: LlamaConfig,
  template: ChatTemplate | null,
): Array<[string, GgufValue]> {
  const json = tokenizer.tokenizerJson;
  const file = tokenizer.file;
  const pre = preTokenizerName(json);
  if (pre === null)
    throw new HfFolderError(
      file,
      'pre_tokenizer',
      'is not one llama.cpp knows by name (those of Qwen2/Qwen3, Llama 3 and SmolLM): llama.cpp would split text differently, so no GGUF is written',
    );
  const model = json.model as { vocab: { [token: string]: number }; merges: unknown[] };
  const tokens: (string | undefined)[] = new Array(config.vocabSize);
  const types = new Array<number>(config.vocabSize).fill(TOKEN_NORMAL);
  for (const [token, id] of Object.entries(model.vocab)) tokens[id] = token;
  for (const t of tokenizer.added) {
    tokens[t.id] = t.content;
    types[t.id] = t.special || looksSpecial(t.content) ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
  }
  for (let id = 0; id < tokens.length; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      types[id] = TOKEN_UNUSED;
    }
  }
  if (new Set(tokens).size !== tokens.length)
    throw new HfFolderError(file, 'model.vocab', 'two ids have one token string (llama.cpp would stop on it)');
  const merges = (model.merges ?? []).map((m, i) => {
    if (typeof m === 'string') return m;
    if (Array.isArray(m) && m.length === 2 && m.every((p) => typeof p === 'string'))
      return m.map((p: string) => p.replaceAll(' ', '\u0120')).join(' ');
    throw new HfFolderError(file, `model.merges[${i}]`, 'is neither "a b" nor ["a", "b"]');
  });
  const out: Array<[string, GgufValue]> = [
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: pre }],
    ['tokenizer.ggml.tokens', { type: 'strings', value: tokens as string[] }],
    ['tokenizer.ggml.token_type', { type: 'i32s', value: types }],
    ['tokenizer.ggml.merges', { type: 'strings', value: merges }],
  ];
  const cfg = tokenizer.tokenizerConfig;
  const idOf = (key: string): number | undefined => {
    const text = tokenText(cfg[key] as never);
    return text === null ? undefined : tokenizer.added.find((t) => t.content === text)?.id;
  };
  const bos = idOf('bos_token') ?? config.bosTokenId ?? undefined;
  const eos = idOf('eos_token') ?? (config.eosTokenIds.length === 1 ? config.eosTokenIds[0] : undefined);
  for (const [key, id] of [
    ['bos_token_id', bos],
    ['eos_token_id', eos],
    ['unknown_token_id', idOf('unk_token')],
    ['padding_token_id', idOf('pad_token')],
  ] as const) {
    if (id !== undefined) out.push([`tokenizer.ggml.${key}`, { type: 'u32', value: id }]);
  }
  out.push(
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: addsBos(json, cfg, bos) }],
    ['tokenizer.ggml.add_eos_token', { type: 'bool', value: cfg.add_eos_token === true }],
  );
  if (template) out.push(['tokenizer.chat_template', { type: 'string', value: template.source }]);
  return out;
}

/** Whether encoding a text adds the BOS: tokenizer_config's add_bos_token, else a post-processor that starts with it. */
function addsBos(json: Json, cfg: Json, bos: number | undefined): boolean {
  if (typeof cfg.add_bos_token === 'boolean') return cfg.add_bos_token;
  const post = json.post_processor as Json | null | undefined;
  const single = post?.type === 'TemplateProcessing' ? (post.single as Json[] | undefined) : undefined;
  const first = single?.[0]?.SpecialToken as Json | undefined;
  const special = (post?.special_tokens as Json | undefined)?.[first?.id as string] as Json | undefined;
  return bos !== undefined && Array.isArray(special?.ids) && (special.ids as number[])[0] === bos;
}
