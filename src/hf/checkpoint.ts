import { join, resolve } from 'node:path';
import type { LlamaModel } from '../architectures/llama/model.ts';
import type { LoraAdapters } from '../architectures/lora.ts';
import type { Json } from '../core/types.ts';
import { HfFolderError } from './errors.ts';
import { hashModel, loadHfModel, openHfFolder, type HfFolder, type LoadDtype } from './folder.ts';
import { readPeftAdapter } from './peft.ts';
import { readJsonFile } from './read-json.ts';

/**
 * A checkpoint of a Hugging Face model this project trained: checkpoint.json beside either the
 * whole Hugging Face folder (full fine-tuning: config.json, model.safetensors, the tokenizer files
 * and template), or LoRA adapters in PEFT's files (peft.ts) with `base` naming the folder they
 * adapt and its content hash (a different base is refused). `hash` is the content hash of the
 * model it computes (the policy version in records); `meta` says how it was trained and samples.
 * `ckpt:DIR` reads either kind.
 */
export const HF_CHECKPOINT_FILE = 'checkpoint.json';
export const HF_CHECKPOINT_FORMAT = 'agent-r1-hf';
/** checkpoint.json holds a hash and a few settings: anything near this size is not one. */
const MAX_CHECKPOINT_JSON_BYTES = 16 << 20;

export interface HfCheckpointJson {
  format: typeof HF_CHECKPOINT_FORMAT;
  version: 1;
  hash: string;
  meta: { [key: string]: Json };
  /** LoRA checkpoints: the base folder (absolute) and its content hash. */
  base?: { dir: string; hash: string };
}

/** checkpoint.json of a folder, or null when it has none (a plain Hugging Face folder, or another kind of checkpoint). */
export async function readHfCheckpoint(dir: string): Promise<HfCheckpointJson | null> {
  const file = join(dir, HF_CHECKPOINT_FILE);
  const json = (await readJsonFile(file, MAX_CHECKPOINT_JSON_BYTES, { optional: true })) as Partial<HfCheckpointJson>;
  if (json === null) return null;
  if (json?.format !== HF_CHECKPOINT_FORMAT || json.version !== 1 || typeof json.hash !== 'string')
    throw new HfFolderError(file, 'format', `is not an ${HF_CHECKPOINT_FORMAT} v1 checkpoint`);
  const meta = json.meta !== null && typeof json.meta === 'object' && !Array.isArray(json.meta) ? json.meta : {};
  const out: HfCheckpointJson = { format: HF_CHECKPOINT_FORMAT, version: 1, hash: json.hash, meta };
  if (json.base !== undefined) {
    const { dir: baseDir, hash } = (json.base ?? {}) as { dir?: unknown; hash?: unknown };
    if (typeof baseDir !== 'string' || typeof hash !== 'string')
      throw new HfFolderError(file, 'base', 'must be {"dir": the base folder, "hash": its content hash}');
    out.base = { dir: resolve(dir, baseDir), hash };
  }
  return out;
}

/** The sampling settings a checkpoint was saved with (`meta.sampling`), numbers only. */
export function savedSampling(meta: { [key: string]: Json }): { temperature?: number; topK?: number; topP?: number } {
  const s = meta.sampling;
  if (s === null || typeof s !== 'object' || Array.isArray(s)) return {};
  const out: { [key: string]: number } = {};
  for (const k of ['temperature', 'topK', 'topP']) if (typeof s[k] === 'number') out[k] = s[k] as number;
  return out;
}

/**
 * A model directory opened without its weights: a Hugging Face folder, or a checkpoint of one. The
 * folder is where the config, tokenizer, template and weights come from: the base's, for adapters.
 */
export async function openModelDir(dir: string): Promise<{ folder: HfFolder; checkpoint: HfCheckpointJson | null }> {
  const checkpoint = await readHfCheckpoint(dir);
  return { folder: await openHfFolder(checkpoint?.base?.dir ?? dir), checkpoint };
}

export interface LoadedModelDir {
  folder: HfFolder;
  checkpoint: HfCheckpointJson | null;
  /** The model it computes: with adapters, the base and the adapters over it (LlamaModel.setAdapters). */
  model: LlamaModel;
  /** Its content hash (checked against a checkpoint's). */
  hash: string;
  /** The folder's own hash: the base's, for adapters. */
  folderHash: string;
  /** A LoRA checkpoint's adapters (the model's). */
  adapters: LoraAdapters | null;
}

/**
 * A model directory loaded: a Hugging Face folder, a full checkpoint, or LoRA adapters over
 * their base, which must be the folder they were trained on (its hash). A checkpoint's stored hash
 * must be what its model hashes to.
 */
export async function loadModelDir(
  dir: string,
  options: { contextLength?: number; dtype?: LoadDtype } = {},
): Promise<LoadedModelDir> {
  const { folder, checkpoint } = await openModelDir(dir);
  const file = join(dir, HF_CHECKPOINT_FILE);
  const { model, hash: folderHash } = await loadHfModel(folder, {
    contextLength: options.contextLength,
    dtype: options.dtype,
  });
  let hash = folderHash;
  let adapters: LoraAdapters | null = null;
  if (checkpoint?.base) {
    if (folderHash !== checkpoint.base.hash)
      throw new HfFolderError(
        file,
        'base',
        `the adapters were trained on a model hashing to ${checkpoint.base.hash.slice(0, 12)}; ${folder.dir} now hashes to ${folderHash.slice(0, 12)} (another model)`,
      );
    adapters = await readPeftAdapter(dir, folder.config);
    model.setAdapters(adapters);
    hash = await hashModel(folder.dir, model);
  }
  if (checkpoint && checkpoint.hash !== hash)
    throw new HfFolderError(
      file,
      'hash',
      `content hash mismatch (stored ${checkpoint.hash.slice(0, 12)}, computed ${hash.slice(0, 12)})`,
    );
  return { folder, checkpoint, model, hash, folderHash, adapters };
}
