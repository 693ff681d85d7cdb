import { z } from 'zod';
import { AgentR1Error } from '../../core/errors.ts';

/**
 * Upper bounds of every size field. A checkpoint is untrusted input: its config decides what is
 * allocated, so each field is bounded here, and the whole model by MAX_MODEL_FLOATS, before anything
 * is built. Far above what a CPU or one GPU trains with this code; raise them if that changes.
 */
export const MODEL_LIMITS = {
  vocabSize: 1 << 21,
  dModel: 1 << 14,
  nLayers: 256,
  nHeads: 256,
  contextLength: 1 << 17,
  dMlp: 1 << 16,
} as const;

/** Float32 values a model may allocate when it is built (weights and position tables): 4 GiB. */
export const MAX_MODEL_FLOATS = 2 ** 30;

/** The GPT's shape (model.ts), as saved in a checkpoint's model.json. */
export const modelConfigSchema = z.object({
  vocabSize: z.number().int().min(2).max(MODEL_LIMITS.vocabSize),
  dModel: z.number().int().min(4).max(MODEL_LIMITS.dModel),
  nLayers: z.number().int().min(1).max(MODEL_LIMITS.nLayers),
  nHeads: z.number().int().min(1).max(MODEL_LIMITS.nHeads),
  contextLength: z.number().int().min(2).max(MODEL_LIMITS.contextLength),
  /** Hidden width of the MLP (default 4 × dModel). */
  dMlp: z.number().int().min(1).max(MODEL_LIMITS.dMlp),
  /** Position encoding: rotary (relative; learns copying much faster) or a learned absolute table. */
  positions: z.enum(['rope', 'learned']).default('rope'),
  /**
   * Token shift: each position also sees the previous token's embedding (times a learned per-channel
   * gate). Copying (induction) then needs one attention layer instead of two, which shortens the
   * long loss plateau small models sit on before they learn to copy numbers.
   */
  tokenShift: z.boolean().default(true),
  /**
   * A copy head (pointer-generator): the next-token distribution mixes the vocabulary softmax with
   * an attention over the sequence's own positions that puts its weight on the tokens found there,
   * by a learned gate. Entity names in questions and documents can then be copied into searches
   * and answers without first learning an embedding → attention → unembedding round trip.
   */
  copyHead: z.boolean().default(false),
});
export type ModelConfig = z.infer<typeof modelConfigSchema>;
export type ModelConfigInput = z.input<typeof modelConfigSchema>;

export const DEFAULT_MODEL_CONFIG: Omit<ModelConfig, 'vocabSize'> = {
  dModel: 64,
  nLayers: 2,
  nHeads: 4,
  contextLength: 512,
  dMlp: 256,
  positions: 'rope',
  tokenShift: true,
  copyHead: false,
};

export class ModelError extends AgentR1Error {}

export function parseModelConfig(input: unknown): ModelConfig {
  const parsed = modelConfigSchema.safeParse(input);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ModelError(`bad model config: ${issues.join('; ')}`);
  }
  const config = parsed.data;
  if (config.dModel % config.nHeads !== 0) {
    throw new ModelError(`dModel (${config.dModel}) must be divisible by nHeads (${config.nHeads})`);
  }
  if (config.positions === 'rope' && (config.dModel / config.nHeads) % 2 !== 0) {
    throw new ModelError(`rotary positions need an even head size, got ${config.dModel / config.nHeads}`);
  }
  const floats = constructionFloats(config);
  if (floats > MAX_MODEL_FLOATS) {
    const gib = (n: number) => `${((n * 4) / 2 ** 30).toFixed(1)} GiB`;
    throw new ModelError(
      `this model config needs ${floats} float32 values (${gib(floats)}) when built; the most is ${gib(MAX_MODEL_FLOATS)}`,
    );
  }
  return config;
}

/**
 * Every weight's name and shape, in the model's fixed (checkpoint) order: what model.ts builds,
 * known before building it, so a checkpoint's weight specs and file size can be checked first.
 */
export function parameterShapes(config: ModelConfig): Array<[string, number[]]> {
  const { vocabSize: V, dModel: d, nLayers: L, contextLength: C, dMlp: M } = config;
  const out: Array<[string, number[]]> = [['tok_emb', [V, d]]];
  if (config.positions === 'learned') out.push(['pos_emb', [C, d]]);
  for (let l = 0; l < L; l++) {
    const p = `h${l}.`;
    out.push(
      [p + 'ln1.g', [d]],
      [p + 'ln1.b', [d]],
      [p + 'attn.wq', [d, d]],
      [p + 'attn.wk', [d, d]],
      [p + 'attn.wv', [d, d]],
      [p + 'attn.bq', [d]],
      [p + 'attn.bk', [d]],
      [p + 'attn.bv', [d]],
      [p + 'attn.wo', [d, d]],
      [p + 'attn.bo', [d]],
      [p + 'ln2.g', [d]],
      [p + 'ln2.b', [d]],
      [p + 'mlp.w1', [d, M]],
      [p + 'mlp.b1', [M]],
      [p + 'mlp.w2', [M, d]],
      [p + 'mlp.b2', [d]],
    );
  }
  if (config.tokenShift) out.push(['shift.gate', [d]]);
  out.push(['lnf.g', [d]], ['lnf.b', [d]], ['value.w', [d, 1]], ['value.b', [1]]);
  if (config.copyHead)
    out.push(['copy.wq', [d, d]], ['copy.wk', [d, d]], ['copy.gate.w', [d, 1]], ['copy.gate.b', [1]]);
  return out;
}

/** Float32 values the weights hold. */
export function parameterCount(config: ModelConfig): number {
  return parameterShapes(config).reduce((n, [, shape]) => n + shape.reduce((a, b) => a * b, 1), 0);
}

/** Float32 values allocated when the model is built: the weights, and the rotary tables (cos, sin, rotation). */
function constructionFloats(config: ModelConfig): number {
  const { dModel: d, contextLength: C } = config;
  return parameterCount(config) + (config.positions === 'rope' ? 2 * C * d + d * d : 0);
}
