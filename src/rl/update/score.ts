import * as tf from '@tensorflow/tfjs';
import { trainingUnits, type TrainingSequence } from '../../policy/trajectory.ts';
import type { TrainConfig } from '../config.ts';
import type { ScoreOutput, TrainablePolicy } from '../trainable.ts';

/** Scores sequences without gradients, in chunks; returns plain per-token arrays. */
export interface Scorer {
  score: TrainablePolicy['score'];
}

/** The scoring passes of one batch: the rollout-time log-probs (and values), and the reference's. */
export interface BatchScores {
  /** Null on the on-policy shortcut (see scoreBatch). */
  old: { logprobs: number[][]; values: number[][] | null } | null;
  /** Null without a KL term. */
  refLogprobs: number[][] | null;
}

/** Pad length: the longest row rounded up to a multiple of 16, so minibatch shapes repeat. */
export function padLength(rows: readonly (readonly number[])[], maxLength: number): number {
  const longest = rows.reduce((a, r) => Math.max(a, r.length), 1);
  return Math.min(maxLength, Math.ceil(longest / 16) * 16);
}

export function padRows(rows: readonly (readonly number[])[], length: number): number[][] {
  return rows.map((r) => {
    const out = r.slice(0, length);
    while (out.length < length) out.push(0);
    return out;
  });
}

/** Per-token outputs of a scorer over many sequences, `chunk` rows per forward pass, no gradients. */
async function scoreAll(
  scorer: Scorer & { maxLength: number },
  seqs: readonly TrainingSequence[],
  chunk: number,
  want: { values?: boolean; entropy?: boolean; temperature?: number },
): Promise<{ logprobs: number[][]; values: number[][] | null; entropy: number[][] | null }> {
  const logprobs: number[][] = [];
  const values: number[][] = [];
  const entropy: number[][] = [];
  for (let start = 0; start < seqs.length; start += chunk) {
    const part = seqs.slice(start, start + chunk);
    const rows = part.map((s) => s.tokens);
    const length = padLength(rows, scorer.maxLength);
    const out: ScoreOutput = scorer.score({
      tokens: rows,
      length,
      values: want.values,
      entropy: want.entropy,
      temperature: want.temperature,
      mask: part.map((s) => s.mask),
    });
    try {
      const [lp, v, e] = await Promise.all([
        out.logprobs.array(),
        want.values && out.values ? out.values.array() : null,
        want.entropy && out.entropy ? out.entropy.array() : null,
      ]);
      part.forEach((s, i) => {
        logprobs.push(lp[i]!.slice(0, s.tokens.length));
        if (v) values.push(v[i]!.slice(0, s.tokens.length));
        if (e) entropy.push(e[i]!.slice(0, s.tokens.length));
      });
    } finally {
      tf.dispose([out.logprobs, out.values, out.entropy].filter((x): x is tf.Tensor2D => x !== undefined));
    }
  }
  return { logprobs, values: want.values ? values : null, entropy: want.entropy ? entropy : null };
}

/**
 * The passes without gradients before an update (verl: compute_log_prob, compute_values,
 * compute_ref_log_prob), all at the rollout temperature: the ratio, KL and entropy are of the
 * policy that acted. Each goes in micro-batches: 64 rows of 768 tokens at once need 600 MB per
 * attention tensor, past the wasm heap (4 GB), which then fails as memory corruption.
 *
 * One update on the whole batch, on-policy, skips the old log-probs: the ratio is exactly 1 at
 * that single step, so the PPO surrogate's gradient is the policy gradient −A·∇logπ and verl's
 * recompute would only reproduce the current log-probs (`recomputeOld` forces it).
 */
export async function scoreBatch(
  model: TrainablePolicy,
  ref: Scorer | null,
  config: TrainConfig,
  seqs: readonly TrainingSequence[],
  options: { recomputeOld?: boolean } = {},
): Promise<BatchScores> {
  const usePpoValue = config.algo === 'ppo';
  const chunk = config.microbatch;
  const onPolicy =
    !options.recomputeOld &&
    config.epochs === 1 &&
    trainingUnits(seqs).length <= config.minibatch &&
    !usePpoValue &&
    config.klMode !== 'reward';
  const temperature = config.temperature;
  const old = onPolicy
    ? null
    : await scoreAll(model, seqs, chunk, { values: usePpoValue, entropy: false, temperature });
  const useKl = config.klMode !== 'none' && config.klCoef > 0 && ref !== null;
  const refScorer = useKl ? { ...ref, maxLength: model.maxLength } : null;
  const refLogprobs = refScorer ? (await scoreAll(refScorer, seqs, chunk, { temperature })).logprobs : null;
  return { old: old && { logprobs: old.logprobs, values: old.values }, refLogprobs };
}
