import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Json } from '../core/types.ts';
import { HfFolderError } from './errors.ts';

/**
 * A checkpoint of a Hugging Face model this project trained is the Hugging Face folder it is
 * (config.json, model.safetensors, the tokenizer files and template), plus checkpoint.json: its
 * content hash (what `loadHfModel` computes from it: the policy version in records) and free-form
 * metadata (how it was trained, how it samples). `ckpt:DIR` reads either kind of checkpoint.
 */
export const HF_CHECKPOINT_FILE = 'checkpoint.json';
export const HF_CHECKPOINT_FORMAT = 'agent-r1-hf';

export interface HfCheckpointJson {
  format: typeof HF_CHECKPOINT_FORMAT;
  version: 1;
  hash: string;
  meta: { [key: string]: Json };
}

/** checkpoint.json of a folder, or null when it has none (a plain Hugging Face folder, or another kind of checkpoint). */
export async function readHfCheckpoint(dir: string): Promise<HfCheckpointJson | null> {
  const file = join(dir, HF_CHECKPOINT_FILE);
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return null;
  let json: Partial<HfCheckpointJson>;
  try {
    json = JSON.parse(text) as Partial<HfCheckpointJson>;
  } catch (error) {
    throw new HfFolderError(file, null, `is not JSON: ${(error as Error).message}`);
  }
  if (json?.format !== HF_CHECKPOINT_FORMAT || json.version !== 1 || typeof json.hash !== 'string')
    throw new HfFolderError(file, 'format', `is not an ${HF_CHECKPOINT_FORMAT} v1 checkpoint`);
  const meta = json.meta !== null && typeof json.meta === 'object' && !Array.isArray(json.meta) ? json.meta : {};
  return { format: HF_CHECKPOINT_FORMAT, version: 1, hash: json.hash, meta };
}

/** The sampling settings a checkpoint was saved with (`meta.sampling`), numbers only. */
export function savedSampling(meta: { [key: string]: Json }): { temperature?: number; topK?: number; topP?: number } {
  const s = meta.sampling;
  if (s === null || typeof s !== 'object' || Array.isArray(s)) return {};
  const out: { [key: string]: number } = {};
  for (const k of ['temperature', 'topK', 'topP']) if (typeof s[k] === 'number') out[k] = s[k] as number;
  return out;
}
