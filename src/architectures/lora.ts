import { createRng } from '../core/rng.ts';
import { ModelConfigError } from './errors.ts';

/**
 * LoRA (Hu et al., 2021): a frozen projection W [out, in] plus a trained low-rank update,
 * W' = W + (alpha / rank)·B·A with A [rank, in] and B [out, rank]. PEFT's conventions: A starts
 * uniform in ±1/√in (its kaiming_uniform with a = √5), B at zero, so training starts from the base.
 */
export interface LoraConfig {
  rank: number;
  alpha: number;
  /** The projections adapted, by module name (`q_proj`, …). */
  targets: readonly string[];
}

/** One projection's adapter: A [rank, in] and B [out, rank], row-major float32. */
export interface LoraPair {
  A: Float32Array;
  B: Float32Array;
}

/** A model's adapters: the config and, per adapted weight (its checkpoint name, `….q_proj.weight`), its pair. */
export interface LoraAdapters {
  config: LoraConfig;
  pairs: Map<string, LoraPair>;
}

export const MAX_LORA_RANK = 1024;

export const loraScale = (config: LoraConfig): number => config.alpha / config.rank;

/** Whether a weight name is one of the adapted projections' (`model.layers.3.self_attn.q_proj.weight` for `q_proj`). */
export function isLoraTarget(name: string, targets: readonly string[]): boolean {
  const parts = name.split('.');
  return parts.at(-1) === 'weight' && targets.includes(parts.at(-2) ?? '');
}

/** Checks a rank and alpha against the projections they adapt (`source` names where they came from). */
export function checkLoraConfig(config: LoraConfig, shapes: readonly number[][], source: string): void {
  const { rank, alpha } = config;
  const smallest = Math.min(MAX_LORA_RANK, ...shapes.flat());
  if (!Number.isInteger(rank) || rank < 1 || rank > smallest)
    throw new ModelConfigError(source, 'rank', `must be an integer from 1 to ${smallest} (got ${rank})`);
  if (!Number.isFinite(alpha) || alpha <= 0) throw new ModelConfigError(source, 'alpha', `must be > 0 (got ${alpha})`);
  if (shapes.length === 0) throw new ModelConfigError(source, 'targets', 'adapt no weight of this model');
}

/** Fresh adapters for the weights of these shapes: A seeded, B zero. */
export function initLora(config: LoraConfig, weights: ReadonlyArray<{ name: string; shape: number[] }>, seed: number) {
  const rng = createRng(seed);
  const pairs = new Map<string, LoraPair>();
  for (const { name, shape } of weights) {
    const [out, inDim] = shape as [number, number];
    const bound = 1 / Math.sqrt(inDim);
    const A = new Float32Array(config.rank * inDim);
    for (let i = 0; i < A.length; i++) A[i] = (2 * rng.next() - 1) * bound;
    pairs.set(name, { A, B: new Float32Array(out * config.rank) });
  }
  return { config, pairs } satisfies LoraAdapters;
}

/**
 * out = base + scale·B·A for a weight [outDim, inDim] (out may be base itself: each element reads
 * only its own base value). Summed over the rank in order, in float64, rounded once; where the
 * update is zero the base's bits stay.
 */
export function mergeLora(
  base: Float32Array,
  pair: LoraPair,
  scale: number,
  outDim: number,
  inDim: number,
  out: Float32Array,
): void {
  const r = pair.B.length / outDim;
  const row = new Float64Array(inDim);
  for (let i = 0; i < outDim; i++) {
    row.fill(0);
    for (let k = 0; k < r; k++) {
      const b = pair.B[i * r + k]!;
      if (b === 0) continue;
      const a = pair.A.subarray(k * inDim, (k + 1) * inDim);
      for (let j = 0; j < inDim; j++) row[j] = row[j]! + b * a[j]!;
    }
    const o = i * inDim;
    for (let j = 0; j < inDim; j++) {
      const delta = scale * row[j]!;
      // A zero update leaves the weight's bits as they are (−0 included).
      out[o + j] = delta === 0 ? base[o + j]! : base[o + j]! + delta;
    }
  }
}
