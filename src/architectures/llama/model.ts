import { ModelConfigError } from '../errors.ts';
import { llamaWeights, type LlamaConfig } from './config.ts';

/**
 * A model of the Llama family: its config and its weights, float32, by their Hugging Face names
 * ([out, in] row-major for a projection, as the checkpoint stores them). `revision` counts changes
 * to the weights, so the decode kernel copies them in again only after an update.
 */
export class LlamaModel {
  revision = 0;
  /** The positions the model is run at (at most the config's max_position_embeddings). */
  readonly contextLength: number;

  constructor(
    readonly config: LlamaConfig,
    readonly weights: ReadonlyMap<string, Float32Array>,
    options: { contextLength?: number } = {},
  ) {
    for (const spec of llamaWeights(config)) {
      const w = weights.get(spec.name);
      const size = spec.shape.reduce((a, b) => a * b, 1);
      if (!w) throw new ModelConfigError('weights', spec.name, 'is missing');
      if (w.length !== size)
        throw new ModelConfigError('weights', spec.name, `has ${w.length} values; [${spec.shape}] needs ${size}`);
    }
    this.contextLength = Math.min(options.contextLength ?? DEFAULT_CONTEXT, config.maxPositions);
  }

  weight(name: string): Float32Array {
    const w = this.weights.get(name);
    if (!w) throw new ModelConfigError('weights', name, 'is missing');
    return w;
  }

  /** The vocabulary head's weights [V, d]: the embedding when tied. */
  get head(): Float32Array {
    return this.weight(this.config.tieEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  }
}

/** Positions a model runs at unless told otherwise (the rotary tables and the attention scratch are sized by it). */
export const DEFAULT_CONTEXT = 32768;
