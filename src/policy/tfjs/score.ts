import * as tf from '@tensorflow/tfjs';
import type { GPTModel } from './model.ts';

/**
 * Scoring for the trainer: one batched forward pass over whole sequences.
 *
 * Alignment (the convention every output follows): index t describes token t of the sequence.
 * `logprobs[b, t]` = log π(tokens[b, t] | tokens[b, < t]); `values[b, t]` = V of the state just
 * before token t was generated; `entropy[b, t]` = entropy of the distribution token t was drawn
 * from. Index 0 has no predecessor and is 0 in all three. Mask with the action mask (1 on the
 * agent's own tokens) to get per-action-token quantities.
 */
export interface ScoreBatch {
  /** [B, T] int32 token ids, right-padded (padding never affects earlier positions). */
  tokens: tf.Tensor2D;
}

export interface ScoreResult {
  /** [B, T] */
  logprobs: tf.Tensor2D;
  /** [B, T] */
  values: tf.Tensor2D;
  /** [B, T] */
  entropy: tf.Tensor2D;
}

/** Differentiable (use inside tf.variableGrads); dispose the results or call it within tf.tidy. */
export function scoreSequences(model: GPTModel, batch: ScoreBatch, options: { temperature?: number } = {}): ScoreResult {
  const [B, T] = batch.tokens.shape;
  const V = model.config.vocabSize;
  return tf.tidy(() => {
    const { logits, values } = model.forward(batch.tokens);
    // Predictions at 0..T-2 score tokens 1..T-1.
    let lg = logits.slice([0, 0, 0], [B, T - 1, V]);
    if (options.temperature && options.temperature !== 1) lg = lg.div(options.temperature);
    const logp = tf.logSoftmax(lg); // [B, T-1, V]
    const targets = batch.tokens.slice([0, 1], [B, T - 1]);
    // One-hot select instead of gather: no gather gradient needed (wasm lacks it).
    const picked = logp.mul(tf.oneHot(targets, V).toFloat()).sum(-1) as tf.Tensor2D;
    const ent = logp.exp().mul(logp).sum(-1).neg() as tf.Tensor2D;
    const zeros = tf.zeros([B, 1]);
    return {
      logprobs: tf.concat([zeros, picked], 1) as tf.Tensor2D,
      values: tf.concat([zeros, values.slice([0, 0], [B, T - 1])], 1) as tf.Tensor2D,
      entropy: tf.concat([zeros, ent], 1) as tf.Tensor2D,
    };
  });
}

/** Pads token sequences to one [B, T] int32 tensor (right padding with `pad`), plus a [B, T] mask tensor when masks are given. */
export function padBatch(
  sequences: readonly (readonly number[])[],
  pad: number,
  masks?: readonly (readonly number[])[],
  length?: number,
): { tokens: tf.Tensor2D; mask?: tf.Tensor2D; length: number } {
  const T = length ?? Math.max(2, ...sequences.map((s) => s.length));
  const B = sequences.length;
  const ids = new Int32Array(B * T).fill(pad);
  const m = masks ? new Float32Array(B * T) : undefined;
  sequences.forEach((s, b) => {
    if (s.length > T) throw new RangeError(`sequence ${b} has ${s.length} tokens, more than the batch length ${T}`);
    ids.set(s, b * T);
    if (m && masks) {
      const mk = masks[b]!;
      if (mk.length !== s.length) throw new RangeError(`mask ${b} has ${mk.length} entries for ${s.length} tokens`);
      m.set(mk, b * T);
    }
  });
  return {
    tokens: tf.tensor2d(ids, [B, T], 'int32'),
    ...(m ? { mask: tf.tensor2d(m, [B, T]) } : {}),
    length: T,
  };
}
