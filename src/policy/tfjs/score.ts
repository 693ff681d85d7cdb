import * as tf from '@tensorflow/tfjs';
import type { GPTModel } from '../../architectures/gpt/model.ts';

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
export function scoreSequences(
  model: GPTModel,
  batch: ScoreBatch,
  options: { temperature?: number } = {},
): ScoreResult {
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

/**
 * Scores only selected tokens: `select` lists flat indices b·T + t (t ≥ 1) of the tokens to score
 * (e.g. the action tokens). Same alignment as scoreSequences, outputs [N] in `select` order. The
 * output head and softmax run on those N positions only, which is most of the cost when the agent's
 * tokens are a small part of the sequence (SFT, RL losses). Differentiable.
 */
export function scoreTokens(
  model: GPTModel,
  tokens: tf.Tensor2D,
  select: readonly number[],
  options: { temperature?: number } = {},
): { logprobs: tf.Tensor1D; values: tf.Tensor1D; entropy: tf.Tensor1D } {
  const [B, T] = tokens.shape;
  const V = model.config.vocabSize;
  const prev = new Int32Array(select.length);
  select.forEach((i, j) => {
    if (!Number.isInteger(i) || i < 0 || i >= B * T || i % T === 0)
      throw new RangeError(`select[${j}] = ${i} is not a token index in 1..T-1 of some row (T = ${T})`);
    prev[j] = i - 1;
  });
  const targetIds = tf.tidy(() => tf.gather(tokens.reshape([B * T]), tf.tensor1d(Int32Array.from(select), 'int32')));
  try {
    return tf.tidy(() => {
      const h = model.hiddenStates(tokens);
      const picked = tf.gather(h, tf.tensor1d(prev, 'int32')) as tf.Tensor2D; // states that predict the selected tokens
      let out = model.predict(h, tokens, prev);
      if (options.temperature && options.temperature !== 1) out = out.div(options.temperature);
      const logp = tf.logSoftmax(out);
      return {
        logprobs: logp.mul(tf.oneHot(targetIds as tf.Tensor1D, V).toFloat()).sum(-1) as tf.Tensor1D,
        values: model.valuesOf(picked),
        entropy: logp.exp().mul(logp).sum(-1).neg() as tf.Tensor1D,
      };
    });
  } finally {
    targetIds.dispose();
  }
}

/** Flat indices (b·T + t) of the positions where a [B][T] mask is 1, for scoreTokens. */
export function maskedIndices(masks: readonly (readonly number[])[], T: number): number[] {
  const out: number[] = [];
  masks.forEach((m, b) =>
    m.forEach((x, t) => {
      if (x && t > 0) out.push(b * T + t);
    }),
  );
  return out;
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

/**
 * Masked token-mean cross-entropy: −Σ mask·logπ / Σ mask, with logprobs from scoreSequences.
 * The SFT loss (mask = the agent's own tokens).
 */
export function maskedNll(logprobs: tf.Tensor2D, mask: tf.Tensor2D): tf.Scalar {
  return tf.tidy(() => logprobs.mul(mask).sum().neg().div(mask.sum().maximum(1)) as tf.Scalar);
}
