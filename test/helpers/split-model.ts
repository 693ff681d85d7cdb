import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { type TinyFolder, writeTinyFolder } from './hf-folder.ts';

// The small model the split-memory tests cut into parts (test/architectures/llama-split*.test.ts):
// five layers at Qwen3's vocabulary, written once per distinct spec.

export const SPLIT_SPEC: TinyFolder = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 32,
  layers: 5,
  heads: 4,
  kvHeads: 2,
  headDim: 8,
  intermediate: 44,
  seed: 21,
};

/** Loads SPLIT_SPEC (with `spec` over it) fresh each call; each distinct folder is written once, under one temporary root that `remove` deletes. */
export function splitModels() {
  const root = mkdtemp(join(tmpdir(), 'agent-r1-llama-split-'));
  const folders = new Map<string, Promise<string>>();
  return {
    async load(spec: Partial<TinyFolder> = {}) {
      const key = JSON.stringify(spec);
      let dir = folders.get(key);
      if (!dir) {
        const path = join(await root, `m${folders.size}`);
        folders.set(key, (dir = writeTinyFolder(path, { ...SPLIT_SPEC, ...spec }).then(() => path)));
      }
      return (await loadHfModel(await openHfFolder(await dir))).model;
    },
    async remove() {
      await rm(await root, { recursive: true, force: true });
    },
  };
}
