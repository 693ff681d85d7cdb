/**
 * The random model folders the benchmarks run on (bench/llm.ts, bench/hf-sft-step.ts), made once
 * into a cache folder (default ~/.cache/agent-r1/bench) and kept: a Qwen3-0.6B-shaped folder takes
 * a minute and 2.4 GB to write.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { exportGguf } from '../src/hf/export.ts';
import { loadHfModel, openHfFolder } from '../src/hf/folder.ts';
import { writeTinyFolder, type TinyFolder } from '../test/helpers/hf-folder.ts';

export const BENCH_CACHE = join(homedir(), '.cache', 'agent-r1', 'bench');

/** Qwen3-0.6B's shape (596M parameters, tied), in F32. */
const QWEN3_0_6B: TinyFolder = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 1024,
  layers: 28,
  heads: 16,
  kvHeads: 8,
  headDim: 128,
  intermediate: 3072,
  seed: 1,
  maxPositions: 40960,
};

/**
 * The shapes: Qwen3-0.6B's (hidden 1024, 28 layers, 16 heads, 8 KV heads, head 128, MLP 3072, tied;
 * 596 M parameters), SmolLM2-135M's body (hidden 576, 30 layers, 9 heads, 3 KV heads, MLP 1536, tied)
 * with Qwen3's 151,936-token vocabulary (the tokenizer here: 194 M parameters, SmolLM2's own 49,152
 * would make 135 M), and the tests' tiny one.
 */
export const SHAPES: { [name: string]: TinyFolder } = {
  'qwen3-0.6b': QWEN3_0_6B,
  /** Qwen3-0.6B's shape in BF16, as Qwen publishes it: the matrices stay 16-bit in memory and in the decode kernel. */
  'qwen3-0.6b-bf16': { ...QWEN3_0_6B, dtype: 'BF16' },
  /** Qwen3-1.7B's shape in BF16 (1.72B parameters, tied): past what float32 fits in the decode kernel's 4 GiB. */
  'qwen3-1.7b-bf16': {
    architecture: 'Qwen3ForCausalLM',
    hidden: 2048,
    layers: 28,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    intermediate: 6144,
    seed: 1,
    maxPositions: 40960,
    dtype: 'BF16',
  },
  /** Qwen2.5-3B's shape in BF16 (3.09B parameters, q/k/v biases, tied; the Agent-R1 paper's model): past one 4 GiB memory. */
  'qwen2.5-3b-bf16': {
    architecture: 'Qwen2ForCausalLM',
    hidden: 2048,
    layers: 36,
    heads: 16,
    kvHeads: 2,
    intermediate: 11008,
    seed: 1,
    maxPositions: 32768,
    dtype: 'BF16',
  },
  /** Qwen3-4B's shape in BF16 (4.02B parameters, tied). */
  'qwen3-4b-bf16': {
    architecture: 'Qwen3ForCausalLM',
    hidden: 2560,
    layers: 36,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    intermediate: 9728,
    seed: 1,
    maxPositions: 40960,
    dtype: 'BF16',
  },
  'smollm2-135m-body': {
    architecture: 'LlamaForCausalLM',
    hidden: 576,
    layers: 30,
    heads: 9,
    kvHeads: 3,
    intermediate: 1536,
    seed: 1,
    maxPositions: 8192,
    ropeTheta: 100000,
  },
  /**
   * The learning checks' model (issue 60): Qwen3's architecture at a tiny width with its real
   * tokenizer, initialized as Transformers' from_config does (std 0.02, norms 1); 9.8 M parameters,
   * 9.7 M of them the tied 151,680-row embedding.
   */
  'qwen3-learner': {
    architecture: 'Qwen3ForCausalLM',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    intermediate: 96,
    vocab: 151_680,
    initializerRange: 0.02,
    seed: 1,
  },
  tiny: {
    architecture: 'Qwen3ForCausalLM',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    intermediate: 96,
    seed: 1,
  },
};

/** The random folder of a shape, written when missing (and its F32 GGUF, with `gguf`). */
export async function randomFolder(
  name: string,
  options: { cache?: string; gguf?: boolean; say?: (line: string) => void } = {},
): Promise<{ dir: string; gguf: string }> {
  const shape = SHAPES[name];
  if (!shape) throw new Error(`unknown shape ${name}; valid: ${Object.keys(SHAPES).join(', ')}`);
  const cache = options.cache ?? BENCH_CACHE;
  const dir = join(cache, `${name}-random`);
  const gguf = join(cache, `${name}-random.gguf`);
  if (!existsSync(join(dir, 'model.safetensors'))) {
    options.say?.(`writing a random ${name} folder to ${dir}`);
    mkdirSync(cache, { recursive: true });
    await writeTinyFolder(dir, shape);
  }
  if (options.gguf && !existsSync(gguf)) {
    options.say?.(`exporting ${gguf}`);
    const folder = await openHfFolder(dir);
    await exportGguf(folder, (await loadHfModel(folder)).model, gguf, shape.dtype ?? 'F32');
  }
  return { dir, gguf };
}

// `tsx bench/random-folders.ts SHAPE DIR`: writes a shape's random folder to DIR (e.g. the learning
// checks' model: `tsx bench/random-folders.ts qwen3-learner runs/qwen3-learner`).
if (process.argv[1]?.endsWith('random-folders.ts') && process.argv.length === 4) {
  const [name, dir] = process.argv.slice(2) as [string, string];
  const shape = SHAPES[name];
  if (!shape) throw new Error(`unknown shape ${name}; valid: ${Object.keys(SHAPES).join(', ')}`);
  await writeTinyFolder(dir, shape);
  process.stdout.write(`wrote ${dir} (${name})\n`);
}
