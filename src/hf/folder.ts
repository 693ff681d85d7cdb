import { createHash, type Hash } from 'node:crypto';
import { lstat, readFile, stat } from 'node:fs/promises';
import { canonicalJson } from '../core/canonical-json.ts';
import { basename, join } from 'node:path';
import { ModelConfigError } from '../architectures/errors.ts';
import {
  kernelWeightBytes,
  llamaConfigFromHf,
  llamaWeights,
  maxWeightBytes,
  memoryBudgetText,
  tokenIdList,
  type LlamaConfig,
} from '../architectures/llama/config.ts';
import {
  Bfloat16Weight,
  contextLengthOf,
  Float16Weight,
  LlamaModel,
  type StoredWeight,
} from '../architectures/llama/model.ts';
import { LlamaDecoder, placeWeights } from '../architectures/llama/decoder.ts';
import { DTYPE_BYTES, isFloatDtype, toFloat32, type FloatDtype } from '../formats/dtype.ts';
import {
  readSafetensorsHeader,
  readTensorBytes,
  readTensorInto,
  tensorValues,
  type TensorEntry,
} from '../formats/safetensors.ts';
import { ChatTemplate } from './chat-template.ts';
import { HfFolderError } from './errors.ts';
import { readFolderFile, readJsonFile } from './read-json.ts';
import { checkTokenizerCounts, HfTokenizer } from './tokenizer.ts';

const MAX_CONFIG_BYTES = 1 << 20;
const MAX_TOKENIZER_CONFIG_BYTES = 16 << 20;
const MAX_TOKENIZER_BYTES = 256 << 20;
const MAX_INDEX_BYTES = 64 << 20;
const MAX_TEMPLATE_BYTES = 1 << 20;

/** Tensors a checkpoint may hold that the model does not use (Transformers ignores them too). */
const IGNORED_TENSOR = /\.rotary_emb\.inv_freq$/;

/**
 * A Hugging Face model folder, opened: its config, tokenizer and chat template read and checked, its
 * weights indexed (from model.safetensors or the shards a model.safetensors.index.json names) but
 * not read. A folder is untrusted input: every file is bounded and checked, no file outside the
 * folder is read, and nothing in it is run (no remote code, no pickled weights; the template runs in
 * a Jinja sandbox).
 */
export interface HfFolder extends HfChat {
  /** Each weight the model needs: where its bytes are. */
  weights: Map<string, TensorEntry>;
  /** The dtype of the matrices (a model's dtype; exports default to it). */
  dtype: FloatDtype;
}

/** What a folder says about text: its config, tokenizer, chat template and end-of-sequence ids (no weights). */
export interface HfChat {
  dir: string;
  config: LlamaConfig;
  tokenizer: HfTokenizer;
  /** null when the folder has no chat template (a base model). */
  template: ChatTemplate | null;
  /** The ids that end generation: config.json's and generation_config.json's eos_token_id. */
  eosTokenIds: number[];
}

export async function openHfFolder(dir: string): Promise<HfFolder> {
  const chat = await openHfChat(dir);
  const weights = await indexWeights(dir, chat.config);
  checkKernelFits(dir, chat.config, weights, 'auto');
  return { ...chat, weights, dtype: matrixDtype(weights) };
}

/**
 * Refuses, before a weight is read, a model whose weights would not fit this machine's memory as
 * they would be held (BF16 matrices in bfloat16 unless widened), with the numbers.
 */
function checkKernelFits(dir: string, config: LlamaConfig, weights: Map<string, TensorEntry>, dtype: LoadDtype): void {
  const keep16 = (name: string) => dtype === 'auto' && isHalf(weights.get(name)?.dtype);
  const bytes = kernelWeightBytes(config, keep16);
  const max = maxWeightBytes();
  if (bytes <= max) return;
  const held = dtype === 'auto' && isHalf(matrixDtype(weights)) ? 'its matrices in 16 bits' : 'in float32';
  const gb = (n: number) => (n / 1e9).toFixed(2);
  throw new ModelConfigError(
    join(dir, 'config.json'),
    null,
    `the weights take ${gb(bytes)} GB held ${held}; this machine holds at most ${gb(max)} GB of weights (${memoryBudgetText()})${held === 'in float32' ? ' (a BF16 or F16 checkpoint loaded as it is takes half)' : ''}`,
  );
}

/** A folder's config, tokenizer and template, read and checked; its weights are not looked at. */
export async function openHfChat(dir: string): Promise<HfChat> {
  const st = await stat(dir).catch(() => null);
  if (!st?.isDirectory()) throw new HfFolderError(dir, null, st ? 'is not a folder' : 'no such folder');
  const configFile = join(dir, 'config.json');
  const configJson = (await readJsonFile(configFile, MAX_CONFIG_BYTES))!;
  const config = llamaConfigFromHf(configJson, configFile);
  const tokenizerFile = join(dir, 'tokenizer.json');
  const tokenizerConfigFile = join(dir, 'tokenizer_config.json');
  const tokenizerJson = (await readJsonFile(tokenizerFile, MAX_TOKENIZER_BYTES, {
    beforeParse: (text) => checkTokenizerCounts(text, tokenizerFile),
  }))!;
  const tokenizerConfig =
    (await readJsonFile(tokenizerConfigFile, MAX_TOKENIZER_CONFIG_BYTES, { optional: true })) ?? {};
  const tokenizer = new HfTokenizer(tokenizerJson, tokenizerConfig, tokenizerFile, config.vocabSize);
  const generation = await readJsonFile(join(dir, 'generation_config.json'), MAX_CONFIG_BYTES, { optional: true });
  const generationEos = generation
    ? tokenIdList(generation.eos_token_id, join(dir, 'generation_config.json'), 'eos_token_id')
    : [];
  const eosTokenIds = [...new Set([...config.eosTokenIds, ...generationEos])];
  for (const id of [...eosTokenIds, ...(config.bosTokenId === null ? [] : [config.bosTokenId])]) {
    if (id >= config.vocabSize)
      throw new ModelConfigError(
        configFile,
        'eos_token_id',
        `token id ${id} is past the vocabulary (${config.vocabSize})`,
      );
  }
  const template = await chatTemplate(dir, tokenizerConfig, tokenizerConfigFile, tokenizer.specialTokens);
  return { dir, config, tokenizer, template, eosTokenIds };
}

/** chat_template.jinja when the folder has one (Transformers prefers it), else tokenizer_config.json's. */
async function chatTemplate(
  dir: string,
  tokenizerConfig: { [key: string]: unknown },
  configFile: string,
  specials: { readonly [name: string]: string },
): Promise<ChatTemplate | null> {
  const jinjaFile = join(dir, 'chat_template.jinja');
  const jinja = await readFolderFile(jinjaFile, MAX_TEMPLATE_BYTES, { optional: true });
  if (jinja) return new ChatTemplate(jinja.toString('utf8'), specials, jinjaFile);
  const t = tokenizerConfig.chat_template;
  if (t === undefined || t === null) return null;
  if (typeof t === 'string') return new ChatTemplate(t, specials, configFile);
  if (!Array.isArray(t)) throw new HfFolderError(configFile, 'chat_template', 'is neither a string nor a list');
  const named: { [name: string]: string } = {};
  for (const [i, entry] of t.entries()) {
    const { name, template } = (entry ?? {}) as { name?: unknown; template?: unknown };
    if (typeof name !== 'string' || typeof template !== 'string')
      throw new HfFolderError(configFile, `chat_template[${i}]`, 'needs a string "name" and "template"');
    named[name] = template;
  }
  return new ChatTemplate(named, specials, configFile);
}

/** Where each weight's bytes are, checked against the config: every weight present, shaped and typed as it needs. */
async function indexWeights(dir: string, config: LlamaConfig): Promise<Map<string, TensorEntry>> {
  const single = join(dir, 'model.safetensors');
  const indexFile = join(dir, 'model.safetensors.index.json');
  const entries: TensorEntry[] = [];
  if (await lstat(single).catch(() => null)) {
    entries.push(...(await readSafetensorsHeader(single)).tensors);
  } else {
    const index = await readJsonFile(indexFile, MAX_INDEX_BYTES, { optional: true });
    if (!index)
      throw new HfFolderError(
        dir,
        null,
        'has no model.safetensors or model.safetensors.index.json (weights are read from safetensors only: pickled .bin files can run code)',
      );
    const map = index.weight_map;
    if (map === null || typeof map !== 'object' || Array.isArray(map))
      throw new HfFolderError(indexFile, 'weight_map', 'is not an object of tensor → file');
    const shards = new Set<string>();
    for (const [name, file] of Object.entries(map)) {
      // Only files beside the index: a shard name is a plain file name, never a path.
      if (typeof file !== 'string' || file !== basename(file) || file === '..' || !file.endsWith('.safetensors'))
        throw new HfFolderError(
          indexFile,
          `weight_map.${name}`,
          `${JSON.stringify(file)} is not a .safetensors file of this folder`,
        );
      shards.add(file);
    }
    for (const shard of [...shards].sort()) {
      const header = await readSafetensorsHeader(join(dir, shard));
      for (const t of header.tensors) {
        if ((map as { [k: string]: string })[t.name] !== shard)
          throw new HfFolderError(indexFile, 'weight_map', `${shard} holds ${t.name}, which the index puts elsewhere`);
        entries.push(t);
      }
    }
    for (const [name, file] of Object.entries(map as { [k: string]: string }))
      if (!entries.some((e) => e.name === name))
        throw new HfFolderError(join(dir, file), name, 'is not in the file, though the index says it is');
  }
  const byName = new Map(entries.map((e) => [e.name, e]));
  const wanted = llamaWeights(config);
  const weights = new Map<string, TensorEntry>();
  for (const { name, shape } of wanted) {
    const e = byName.get(name);
    if (!e) throw new HfFolderError(dir, name, 'the config needs this weight, and no safetensors file has it');
    if (e.shape.join(',') !== shape.join(','))
      throw new HfFolderError(e.file, name, `has shape [${e.shape}]; the config needs [${shape}]`);
    if (!isFloatDtype(e.dtype))
      throw new HfFolderError(
        e.file,
        name,
        `is ${e.dtype}; weights are read as F32, F16 or BF16 (quantized weights are not)`,
      );
    weights.set(name, e);
  }
  for (const e of entries) {
    if (weights.has(e.name) || IGNORED_TENSOR.test(e.name)) continue;
    if (e.name === 'lm_head.weight' && config.tieEmbeddings) continue; // tied: the embedding is the head
    throw new HfFolderError(e.file, e.name, `is not a weight of ${config.architecture} with this config`);
  }
  return weights;
}

const isHalf = (dtype: string | undefined) => dtype === 'BF16' || dtype === 'F16';

function matrixDtype(weights: Map<string, TensorEntry>): FloatDtype {
  const matrix = [...weights.values()].find((e) => e.shape.length === 2);
  return (matrix?.dtype ?? 'F32') as FloatDtype;
}

/** The files besides the weights that decide what a folder's model does. */
const DEFINING_FILES = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'chat_template.jinja',
];

/** config.json keys that say how the weights are stored, not what the model computes. */
const STORAGE_KEYS = new Set(['torch_dtype', 'dtype']);

/**
 * A model's content hash, the policy version in records: sha256 over the files that decide what it
 * does (config, generation config, tokenizer, template; JSON files by their content, config.json
 * without its storage dtype) and every weight's name, shape and float32 values, in the
 * architecture's order. A folder and its export in another dtype of the same values hash alike.
 */
export class ModelHasher {
  private constructor(private readonly h: Hash) {}

  /** A hasher that has read the defining files of `dir`. */
  static async of(dir: string): Promise<ModelHasher> {
    const h = createHash('sha256');
    for (const name of DEFINING_FILES) {
      const bytes = await readFile(join(dir, name)).catch(() => null);
      let content = bytes;
      if (bytes && name.endsWith('.json')) {
        const json = JSON.parse(bytes.toString('utf8')) as { [key: string]: unknown };
        if (name === 'config.json') for (const k of STORAGE_KEYS) delete json[k];
        content = Buffer.from(canonicalJson(json));
      }
      h.update(canonicalJson([name, content === null ? null : content.length]));
      if (content) h.update(content);
    }
    return new ModelHasher(h);
  }

  weight(name: string, shape: readonly number[], values: Float32Array): void {
    this.h.update(canonicalJson([name, shape]));
    this.update(values);
  }

  /** As weight(), from the stored bytes, widened a block at a time (a GB tensor is not copied whole). */
  weightBytes(name: string, shape: readonly number[], bytes: Uint8Array, dtype: FloatDtype): void {
    this.h.update(canonicalJson([name, shape]));
    const block = (1 << 22) * DTYPE_BYTES[dtype];
    for (let at = 0; at < bytes.length; at += block)
      this.update(toFloat32(bytes.subarray(at, Math.min(bytes.length, at + block)), dtype));
  }

  private update(values: Float32Array): void {
    this.h.update(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
  }

  digest(): string {
    return this.h.digest('hex');
  }
}

/** The content hash of a model's weights with the defining files of `dir` (what loadHfModel computes for a folder). */
export async function hashModel(dir: string, model: LlamaModel): Promise<string> {
  const h = await ModelHasher.of(dir);
  for (const { name, shape } of llamaWeights(model.config)) h.weight(name, shape, model.weight(name));
  return h.digest();
}

/** How a model's weights are held once loaded: as the checkpoint stores them, or all widened to float32. */
export type LoadDtype = 'auto' | 'F32';

/**
 * Reads the folder's weights into a model, with its content hash (ModelHasher, over the float32
 * values, whatever the dtype). Matrices stored in BF16 or F16 stay 16-bit (`dtype: 'auto'`, the
 * default: half the memory, and the decode kernel streams half the bytes, with the same logits as
 * widened); `dtype: 'F32'` widens them. The vectors (norms, biases) are read as float32.
 */
export async function loadHfModel(
  folder: HfFolder,
  options: { contextLength?: number; dtype?: LoadDtype } = {},
): Promise<{ model: LlamaModel; hash: string }> {
  const dtype = options.dtype ?? 'auto';
  checkKernelFits(folder.dir, folder.config, folder.weights, dtype);
  const h = await ModelHasher.of(folder.dir);
  // The matrices go straight into the decode kernel's memories (the model holds views of them: one
  // copy), unless their dtypes are mixed (the kernel then holds them widened, beside the model's).
  const matrices = llamaWeights(folder.config).filter((w) => w.shape.length === 2);
  const dtypes = new Set(matrices.map((w) => folder.weights.get(w.name)!.dtype));
  const one = dtypes.size === 1 ? [...dtypes][0]! : null;
  const half = dtype === 'auto' && (one === 'BF16' || one === 'F16') ? one : null;
  const contextLength = contextLengthOf(folder.config, options.contextLength);
  const placement = one !== null ? placeWeights(folder.config, half, contextLength) : null;
  const weights = new Map<string, StoredWeight>();
  for (const [name, entry] of folder.weights) {
    const view = placement?.views.get(name);
    if (view && isFloatDtype(entry.dtype) && DTYPE_BYTES[entry.dtype] === view.BYTES_PER_ELEMENT) {
      // Stored as held: the file's bytes are the view's.
      const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
      await readTensorInto(entry, bytes);
      h.weightBytes(name, entry.shape, bytes, entry.dtype);
      weights.set(
        name,
        view instanceof Float32Array ? view : half === 'BF16' ? new Bfloat16Weight(view) : new Float16Weight(view),
      );
      continue;
    }
    const values = tensorValues(entry, await readTensorBytes(entry));
    h.weight(name, entry.shape, values);
    if (view instanceof Float32Array) {
      view.set(values);
      weights.set(name, view);
      continue;
    }
    const keep16 = isHalf(entry.dtype) && entry.shape.length === 2 && dtype === 'auto';
    weights.set(name, !keep16 ? values : entry.dtype === 'BF16' ? Bfloat16Weight.of(values) : Float16Weight.of(values));
  }
  const model = new LlamaModel(folder.config, weights, options);
  if (placement) LlamaDecoder.adopt(model, placement);
  return { model, hash: h.digest() };
}
