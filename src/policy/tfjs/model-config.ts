import { z } from 'zod';
import { AgentR1Error } from '../../core/errors.ts';

/** The GPT's shape (model.ts), as saved in a checkpoint's model.json. */
export const modelConfigSchema = z.object({
  vocabSize: z.number().int().min(2),
  dModel: z.number().int().min(4),
  nLayers: z.number().int().min(1),
  nHeads: z.number().int().min(1),
  contextLength: z.number().int().min(2),
  /** Hidden width of the MLP (default 4 × dModel). */
  dMlp: z.number().int().min(1),
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

export function parseModelConfig(config: unknown): ModelConfig {
  const parsed = modelConfigSchema.safeParse(config);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ModelError(`bad model config: ${issues.join('; ')}`);
  }
  if (parsed.data.dModel % parsed.data.nHeads !== 0) {
    throw new ModelError(`dModel (${parsed.data.dModel}) must be divisible by nHeads (${parsed.data.nHeads})`);
  }
  return parsed.data;
}
