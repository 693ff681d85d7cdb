import type { LlamaConfig } from './config.ts';

/**
 * The rotary inverse frequencies, one per pair of a head's dims (head_dim / 2), in float64:
 * 1 / θ^(2i/dh), rescaled as Llama 3 does when the config says so (Transformers'
 * _compute_llama3_parameters: long wavelengths divided by the factor, short ones kept, the band
 * between smoothly interpolated).
 */
export function inverseFrequencies(config: LlamaConfig): Float64Array {
  const dh = config.headDim;
  const out = new Float64Array(dh / 2);
  for (let i = 0; i < dh / 2; i++) out[i] = 1 / config.ropeTheta ** ((2 * i) / dh);
  const s = config.ropeScaling;
  if (!s) return out;
  const lowWavelen = s.originalMaxPositions / s.lowFreqFactor;
  const highWavelen = s.originalMaxPositions / s.highFreqFactor;
  for (let i = 0; i < out.length; i++) {
    const f = out[i]!;
    const wavelen = (2 * Math.PI) / f;
    if (wavelen > lowWavelen) out[i] = f / s.factor;
    else if (wavelen >= highWavelen) {
      const smooth = (s.originalMaxPositions / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = ((1 - smooth) * f) / s.factor + smooth * f;
    }
  }
  return out;
}

/** cos and sin of position × frequency, [positions][head_dim / 2] each, computed in float64 and rounded to float32. */
export function ropeTables(config: LlamaConfig, positions: number): { cos: Float32Array; sin: Float32Array } {
  const freqs = inverseFrequencies(config);
  const half = freqs.length;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * freqs[i]!;
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}
