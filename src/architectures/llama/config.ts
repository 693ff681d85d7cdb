import { totalmem } from 'node:os';
import { ModelConfigError } from '../errors.ts';

/**
 * The Llama family's configuration: Llama 3.x, SmolLM2 and TinyLlama (`LlamaForCausalLM`), Qwen2 and
 * Qwen2.5 (`Qwen2ForCausalLM`: q/k/v biases), Qwen3 (`Qwen3ForCausalLM`: per-head q/k RMSNorm).
 * One decoder: pre-norm RMSNorm blocks, grouped-query attention with rotate-half rotary positions,
 * a SwiGLU MLP, a final RMSNorm and a vocabulary head (the embedding when tied). Read from a
 * Hugging Face config.json by `llamaConfigFromHf`, with Transformers' defaults where a key is absent.
 */
export const LLAMA_ARCHITECTURES = ['LlamaForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM'] as const;
export type LlamaArchitecture = (typeof LLAMA_ARCHITECTURES)[number];

export interface Llama3RopeScaling {
  type: 'llama3';
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMaxPositions: number;
}

export interface LlamaConfig {
  architecture: LlamaArchitecture;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  ropeTheta: number;
  ropeScaling: Llama3RopeScaling | null;
  rmsNormEps: number;
  maxPositions: number;
  tieEmbeddings: boolean;
  /** Biases on the q, k and v projections. */
  qkvBias: boolean;
  /** A bias on the output projection. */
  oBias: boolean;
  /** Biases on the gate, up and down projections. */
  mlpBias: boolean;
  /** Qwen3's RMSNorm of each head of q and k before the rotary. */
  qkNorm: boolean;
  bosTokenId: number | null;
  eosTokenIds: number[];
  /** The dtype the checkpoint says it was saved in (`torch_dtype`), for information. */
  dtype: string | null;
}

/**
 * Bounds of every size field: a config is untrusted input and decides what is allocated, so each
 * size is bounded here, and the whole model by maxWeightBytes, before a weight is read.
 */
export const LLAMA_LIMITS = {
  vocabSize: 1 << 21,
  hiddenSize: 1 << 15,
  intermediateSize: 1 << 17,
  numLayers: 512,
  numHeads: 512,
  headDim: 1024,
  maxPositions: 1 << 24,
} as const;

/**
 * The most bytes of weights, as held, a model may have on this machine: 80% of its RAM (os.totalmem,
 * or AGENT_R1_MEMORY_BYTES). A loaded model holds its weights once, in the decode kernel's memories
 * (past one 4 GiB memory it is split by layers between several). Checked against the config's
 * parameter count before anything is read (16 bits a parameter at least), then against the folder's
 * dtypes (kernelWeightBytes).
 */
export function maxWeightBytes(): number {
  const env = Number(process.env.AGENT_R1_MEMORY_BYTES);
  return Math.floor((Number.isFinite(env) && env > 0 ? env : totalmem()) * 0.8);
}

/** "80% of its N GB of RAM": how maxWeightBytes came about, for a refusal. */
export const memoryBudgetText = () => `80% of its ${(maxWeightBytes() / 0.8 / 1e9).toFixed(1)} GB of RAM`;

/** Bytes one weight is held in: 2 a value for a matrix kept in 16 bits (`half`), else 4. */
export function heldBytes(shape: readonly number[], half: boolean): number {
  return shape.reduce((a, b) => a * b, 1) * (shape.length === 2 && half ? 2 : 4);
}

/** Bytes the decode kernel holds the weights in: 2 a value for the matrices `bf16` says are kept in bfloat16, else 4. */
export function kernelWeightBytes(config: LlamaConfig, bf16: (name: string) => boolean): number {
  return llamaWeights(config).reduce((n, w) => n + heldBytes(w.shape, bf16(w.name)), 0);
}

/** The keys each architecture's Transformers config defaults, where a checkpoint's config.json leaves them out. */
const DEFAULTS: {
  [A in LlamaArchitecture]: { maxPositions: number; headDim: 'split' | number; kvHeads: 'heads' | number };
} = {
  LlamaForCausalLM: { maxPositions: 2048, headDim: 'split', kvHeads: 'heads' },
  Qwen2ForCausalLM: { maxPositions: 32768, headDim: 'split', kvHeads: 32 },
  Qwen3ForCausalLM: { maxPositions: 32768, headDim: 128, kvHeads: 32 },
};

/** config.json (parsed JSON) → LlamaConfig; `file` names it in errors. */
export function llamaConfigFromHf(json: unknown, file: string): LlamaConfig {
  const fail = (field: string | null, problem: string) => new ModelConfigError(file, field, problem);
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw fail(null, 'is not a JSON object');
  const c = json as { [key: string]: unknown };
  const archs = c.architectures;
  const architecture = Array.isArray(archs) && archs.length === 1 ? archs[0] : archs;
  if (typeof architecture !== 'string' || !(LLAMA_ARCHITECTURES as readonly string[]).includes(architecture))
    throw fail(
      'architectures',
      `${JSON.stringify(archs)} is not an architecture this build runs (${LLAMA_ARCHITECTURES.join(', ')})`,
    );
  const arch = architecture as LlamaArchitecture;
  const defaults = DEFAULTS[arch];
  const int = (key: string, max: number, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (v === undefined) throw fail(key, 'is missing');
    if (!Number.isSafeInteger(v) || (v as number) < 1 || (v as number) > max)
      throw fail(key, `${JSON.stringify(v)} is not an integer from 1 to ${max}`);
    return v as number;
  };
  const num = (key: string, fallback: number, ok: (n: number) => boolean, what: string): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw fail(key, `${JSON.stringify(v)} is not ${what}`);
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'boolean') throw fail(key, `${JSON.stringify(v)} is not true or false`);
    return v;
  };
  const act = c.hidden_act ?? 'silu';
  if (act !== 'silu') throw fail('hidden_act', `${JSON.stringify(act)}: only silu (SwiGLU) is implemented`);
  if (c.use_sliding_window === true)
    throw fail(
      'use_sliding_window',
      'sliding-window attention is not implemented (set it false to use full attention)',
    );
  const hiddenSize = int('hidden_size', LLAMA_LIMITS.hiddenSize);
  const numHeads = int('num_attention_heads', LLAMA_LIMITS.numHeads);
  const kvDefault = defaults.kvHeads === 'heads' ? numHeads : defaults.kvHeads;
  const numKvHeads = int('num_key_value_heads', LLAMA_LIMITS.numHeads, kvDefault);
  if (numHeads % numKvHeads !== 0)
    throw fail('num_key_value_heads', `${numKvHeads} does not divide num_attention_heads (${numHeads})`);
  const headDefault = defaults.headDim === 'split' ? hiddenSize / numHeads : defaults.headDim;
  const headDim = int('head_dim', LLAMA_LIMITS.headDim, Number.isInteger(headDefault) ? headDefault : undefined);
  if (headDim % 2 !== 0) throw fail('head_dim', `${headDim}: rotary positions need an even head size`);
  // Transformers v5 writes rope_parameters {rope_type, rope_theta, …}; earlier, rope_theta and rope_scaling.
  const rope = (c.rope_parameters ?? c.rope_scaling ?? null) as { [key: string]: unknown } | null;
  const ropeField = c.rope_parameters !== undefined ? 'rope_parameters' : 'rope_scaling';
  if (rope !== null && (typeof rope !== 'object' || Array.isArray(rope))) throw fail(ropeField, 'is not an object');
  const ropeTheta =
    rope && typeof rope.rope_theta === 'number'
      ? rope.rope_theta
      : num('rope_theta', 10000, (n) => n > 0, 'a positive number');
  if (!(ropeTheta > 0 && Number.isFinite(ropeTheta))) throw fail(ropeField, `rope_theta ${ropeTheta} is not positive`);
  const config: LlamaConfig = {
    architecture: arch,
    vocabSize: int('vocab_size', LLAMA_LIMITS.vocabSize),
    hiddenSize,
    intermediateSize: int('intermediate_size', LLAMA_LIMITS.intermediateSize),
    numLayers: int('num_hidden_layers', LLAMA_LIMITS.numLayers),
    numHeads,
    numKvHeads,
    headDim,
    ropeTheta,
    ropeScaling: ropeScaling(rope, (problem) => fail(ropeField, problem)),
    rmsNormEps: num('rms_norm_eps', 1e-6, (n) => n > 0 && n < 1, 'a number in (0, 1)'),
    maxPositions: int('max_position_embeddings', LLAMA_LIMITS.maxPositions, defaults.maxPositions),
    tieEmbeddings: bool('tie_word_embeddings', false),
    qkvBias: arch === 'Qwen2ForCausalLM' ? true : bool('attention_bias', false),
    oBias: arch === 'Qwen2ForCausalLM' ? false : bool('attention_bias', false),
    mlpBias: arch === 'LlamaForCausalLM' ? bool('mlp_bias', false) : false,
    qkNorm: arch === 'Qwen3ForCausalLM',
    bosTokenId: tokenId(c.bos_token_id, 'bos_token_id', fail),
    eosTokenIds: tokenIds(c.eos_token_id, 'eos_token_id', fail),
    dtype: typeof (c.torch_dtype ?? c.dtype) === 'string' ? ((c.torch_dtype ?? c.dtype) as string) : null,
  };
  const floats = parameterCount(config);
  const max = maxWeightBytes();
  if (floats * 2 > max)
    throw fail(
      null,
      `the model has ${floats} parameters, ${((floats * 2) / 1e9).toFixed(1)} GB in 16 bits; this machine holds at most ${(max / 1e9).toFixed(1)} GB of weights (${memoryBudgetText()})`,
    );
  return config;
}

function ropeScaling(
  rope: { [key: string]: unknown } | null,
  fail: (problem: string) => ModelConfigError,
): Llama3RopeScaling | null {
  if (rope === null) return null;
  const type = rope.rope_type ?? rope.type ?? 'default';
  if (type === 'default') return null;
  if (type !== 'llama3') throw fail(`rope type ${JSON.stringify(type)} is not implemented (default and llama3 are)`);
  const positive = (key: string, fallback?: number) => {
    const v = rope[key] ?? fallback;
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v))
      throw fail(`${key} ${JSON.stringify(v)} is not a positive number`);
    return v;
  };
  const scaling: Llama3RopeScaling = {
    type: 'llama3',
    factor: positive('factor'),
    lowFreqFactor: positive('low_freq_factor'),
    highFreqFactor: positive('high_freq_factor'),
    originalMaxPositions: positive('original_max_position_embeddings'),
  };
  if (scaling.highFreqFactor <= scaling.lowFreqFactor)
    throw fail(`high_freq_factor (${scaling.highFreqFactor}) must exceed low_freq_factor (${scaling.lowFreqFactor})`);
  return scaling;
}

function tokenId(v: unknown, key: string, fail: (f: string, p: string) => ModelConfigError): number | null {
  if (v === undefined || v === null) return null;
  if (!Number.isSafeInteger(v) || (v as number) < 0) throw fail(key, `${JSON.stringify(v)} is not a token id`);
  return v as number;
}

/** A token id or a list of them (eos_token_id), from any config file. */
export function tokenIdList(value: unknown, file: string, key: string): number[] {
  return tokenIds(value, key, (field, problem) => new ModelConfigError(file, field, problem));
}

function tokenIds(v: unknown, key: string, fail: (f: string, p: string) => ModelConfigError): number[] {
  if (v === undefined || v === null) return [];
  const list = Array.isArray(v) ? v : [v];
  return list.map((x) => tokenId(x, key, fail)!);
}

/** One weight of the architecture: its Hugging Face name and shape ([out, in] for a projection). */
export interface WeightSpec {
  name: string;
  shape: number[];
}

/** Every weight the config needs, by its Hugging Face name, in the checkpoint's usual order. */
export function llamaWeights(config: LlamaConfig): WeightSpec[] {
  const { vocabSize: V, hiddenSize: d, intermediateSize: M, numHeads: H, numKvHeads: Hkv, headDim: dh } = config;
  const out: WeightSpec[] = [{ name: 'model.embed_tokens.weight', shape: [V, d] }];
  const add = (name: string, shape: number[]) => out.push({ name, shape });
  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}.`;
    add(`${p}input_layernorm.weight`, [d]);
    for (const [proj, rows] of [
      ['q_proj', H * dh],
      ['k_proj', Hkv * dh],
      ['v_proj', Hkv * dh],
    ] as const) {
      add(`${p}self_attn.${proj}.weight`, [rows, d]);
      if (config.qkvBias) add(`${p}self_attn.${proj}.bias`, [rows]);
    }
    add(`${p}self_attn.o_proj.weight`, [d, H * dh]);
    if (config.oBias) add(`${p}self_attn.o_proj.bias`, [d]);
    if (config.qkNorm) {
      add(`${p}self_attn.q_norm.weight`, [dh]);
      add(`${p}self_attn.k_norm.weight`, [dh]);
    }
    add(`${p}post_attention_layernorm.weight`, [d]);
    for (const [proj, shape] of [
      ['gate_proj', [M, d]],
      ['up_proj', [M, d]],
      ['down_proj', [d, M]],
    ] as const) {
      add(`${p}mlp.${proj}.weight`, [...shape]);
      if (config.mlpBias) add(`${p}mlp.${proj}.bias`, [shape[0]]);
    }
  }
  add('model.norm.weight', [d]);
  if (!config.tieEmbeddings) add('lm_head.weight', [V, d]);
  return out;
}

/** The projections LoRA adapts by default: every attention and MLP projection (PEFT's names). */
export const LLAMA_LORA_TARGETS = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
] as const;

/** The float32 values the weights hold. */
export function parameterCount(config: LlamaConfig): number {
  return llamaWeights(config).reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
}
