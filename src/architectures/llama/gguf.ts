import type { FloatDtype } from '../../formats/dtype.ts';
import type { GgufTensor, GgufValue } from '../../formats/gguf.ts';
import { llamaWeights, type LlamaArchitecture, type LlamaConfig } from './config.ts';
import type { LlamaModel } from './model.ts';

/**
 * The Llama family in GGUF, as llama.cpp's convert_hf_to_gguf.py writes it: the architecture name,
 * the hyperparameter keys, each tensor's GGUF name (one table), the q/k permutation of the `llama`
 * architecture (llama.cpp rotates adjacent pairs there, Transformers the two halves of a head), and
 * Llama 3's rope scaling as a `rope_freqs` tensor. Norms and biases are written as F32, as convert does.
 */
export const GGUF_ARCHITECTURE: { readonly [A in LlamaArchitecture]: string } = {
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
};

/** Hugging Face tensor name → GGUF tensor name. */
const TENSOR_NAMES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^model\.embed_tokens\.weight$/, 'token_embd.weight'],
  [/^model\.norm\.weight$/, 'output_norm.weight'],
  [/^lm_head\.weight$/, 'output.weight'],
  [/^model\.layers\.(\d+)\.input_layernorm\.weight$/, 'blk.$1.attn_norm.weight'],
  [/^model\.layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)$/, 'blk.$1.attn_q.$2'],
  [/^model\.layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)$/, 'blk.$1.attn_k.$2'],
  [/^model\.layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)$/, 'blk.$1.attn_v.$2'],
  [/^model\.layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)$/, 'blk.$1.attn_output.$2'],
  [/^model\.layers\.(\d+)\.self_attn\.q_norm\.weight$/, 'blk.$1.attn_q_norm.weight'],
  [/^model\.layers\.(\d+)\.self_attn\.k_norm\.weight$/, 'blk.$1.attn_k_norm.weight'],
  [/^model\.layers\.(\d+)\.post_attention_layernorm\.weight$/, 'blk.$1.ffn_norm.weight'],
  [/^model\.layers\.(\d+)\.mlp\.gate_proj\.(weight|bias)$/, 'blk.$1.ffn_gate.$2'],
  [/^model\.layers\.(\d+)\.mlp\.up_proj\.(weight|bias)$/, 'blk.$1.ffn_up.$2'],
  [/^model\.layers\.(\d+)\.mlp\.down_proj\.(weight|bias)$/, 'blk.$1.ffn_down.$2'],
];

export function ggufTensorName(hfName: string): string {
  for (const [pattern, name] of TENSOR_NAMES) if (pattern.test(hfName)) return hfName.replace(pattern, name);
  throw new Error(`no GGUF name for tensor ${hfName}`);
}

/** general.file_type of an unquantized model (llama.cpp's LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_BF16). */
const FILE_TYPE: { readonly [D in FloatDtype]: number } = { F32: 0, F16: 1, BF16: 32 };

/** The architecture's hyperparameters as GGUF keys. */
export function ggufHyperparameters(config: LlamaConfig, name: string, dtype: FloatDtype): Array<[string, GgufValue]> {
  const a = GGUF_ARCHITECTURE[config.architecture];
  const u32 = (value: number): GgufValue => ({ type: 'u32', value });
  const out: Array<[string, GgufValue]> = [
    ['general.architecture', { type: 'string', value: a }],
    ['general.type', { type: 'string', value: 'model' }],
    ['general.name', { type: 'string', value: name }],
    ['general.file_type', u32(FILE_TYPE[dtype])],
    [`${a}.block_count`, u32(config.numLayers)],
    [`${a}.context_length`, u32(config.maxPositions)],
    [`${a}.embedding_length`, u32(config.hiddenSize)],
    [`${a}.feed_forward_length`, u32(config.intermediateSize)],
    [`${a}.attention.head_count`, u32(config.numHeads)],
    [`${a}.attention.head_count_kv`, u32(config.numKvHeads)],
    [`${a}.attention.key_length`, u32(config.headDim)],
    [`${a}.attention.value_length`, u32(config.headDim)],
    [`${a}.rope.freq_base`, { type: 'f32', value: config.ropeTheta }],
    [`${a}.attention.layer_norm_rms_epsilon`, { type: 'f32', value: config.rmsNormEps }],
  ];
  if (a === 'llama')
    out.push(['llama.vocab_size', u32(config.vocabSize)], ['llama.rope.dimension_count', u32(config.headDim)]);
  return out;
}

/**
 * The model's tensors as GGUF writes them: renamed, q/k permuted for `llama`, matrices in `dtype`,
 * norms and biases F32, and `rope_freqs` (the per-frequency divisors) when Llama 3's rope scaling is on.
 */
export function ggufTensors(model: LlamaModel, dtype: FloatDtype): GgufTensor[] {
  const c = model.config;
  const permuted = GGUF_ARCHITECTURE[c.architecture] === 'llama';
  const out: GgufTensor[] = [];
  if (c.ropeScaling)
    out.push({ name: 'rope_freqs.weight', shape: [c.headDim / 2], dtype: 'F32', values: () => ropeFreqFactors(c) });
  for (const { name, shape } of llamaWeights(c)) {
    // Widened to float32 one tensor at a time, as the writer asks (a multi-GB model is never copied whole).
    const values = () => model.weight(name);
    const plain = shape.length === 1 || name.endsWith('norm.weight') || !name.endsWith('.weight');
    const heads = /\.q_proj\./.test(name) ? c.numHeads : /\.k_proj\./.test(name) ? c.numKvHeads : 0;
    out.push({
      name: ggufTensorName(name),
      shape,
      dtype: plain ? 'F32' : dtype,
      values: () => (permuted && heads ? permuteRotaryPairs(values(), heads, c.headDim) : values()),
    });
  }
  return out;
}

/**
 * Rows of a q or k projection (weight [heads·dh, in], or bias [heads·dh]) reordered from rotate-half
 * to adjacent pairs: within each head, new row 2i + j is old row j·dh/2 + i.
 */
export function permuteRotaryPairs(w: Float32Array, heads: number, dh: number): Float32Array {
  const cols = w.length / (heads * dh);
  const out = new Float32Array(w.length);
  const half = dh / 2;
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < half; i++)
      for (let j = 0; j < 2; j++) {
        const to = (h * dh + 2 * i + j) * cols;
        const from = (h * dh + j * half + i) * cols;
        out.set(w.subarray(from, from + cols), to);
      }
  return out;
}

/** Llama 3's rope scaling as llama.cpp reads it: each frequency's divisor (1, the factor, or between). */
function ropeFreqFactors(c: LlamaConfig): Float32Array {
  const s = c.ropeScaling!;
  const half = c.headDim / 2;
  const out = new Float32Array(half);
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / (1 / c.ropeTheta ** ((2 * i) / c.headDim));
    if (wavelen < s.originalMaxPositions / s.highFreqFactor) out[i] = 1;
    else if (wavelen > s.originalMaxPositions / s.lowFreqFactor) out[i] = s.factor;
    else {
      const smooth = (s.originalMaxPositions / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return out;
}
