import type { AdvantageResult } from '../advantages.ts';
import type { MinibatchStats } from './minibatch.ts';

export interface UpdateMetrics {
  /** Sequences trained on, and their action tokens. */
  sequences: number;
  actionTokens: number;
  /** Sequences dropped because no action token fits in the model's context. */
  tooLong: number;
  policyLoss: number;
  valueLoss: number | null;
  /** Mean KL(π ‖ ref) estimate over action tokens (null without a reference). */
  kl: number | null;
  /** Mean entropy of the policy over action tokens (first epoch's forward passes). */
  entropy: number;
  clipFraction: number;
  dualClipFraction: number;
  /** mean(old − new log-prob) over the minibatches: how far the updates moved the policy. */
  approxKl: number;
  /** Mean and max global grad norm (before clipping) over the optimizer steps. */
  gradNorm: number;
  gradNormMax: number;
  /** Optimizer steps skipped for a non-finite gradient. */
  skippedSteps: number;
  optimizerSteps: number;
  advantageMean: number;
  advantageAbsMean: number;
}

/** The metrics of an update with nothing to train on. */
export function emptyMetrics(tooLong: number): UpdateMetrics {
  return {
    sequences: 0,
    actionTokens: 0,
    tooLong,
    policyLoss: 0,
    valueLoss: null,
    kl: null,
    entropy: 0,
    clipFraction: 0,
    dualClipFraction: 0,
    approxKl: 0,
    gradNorm: 0,
    gradNormMax: 0,
    skippedSteps: 0,
    optimizerSteps: 0,
    advantageMean: 0,
    advantageAbsMean: 0,
  };
}

function maskedMeanOf(rows: readonly (readonly number[])[], masks: readonly (readonly number[])[]): number {
  let sum = 0;
  let n = 0;
  rows.forEach((r, i) =>
    r.forEach((x, t) => {
      if (masks[i]![t] === 1) {
        sum += x;
        n++;
      }
    }),
  );
  return n === 0 ? 0 : sum / n;
}

const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/**
 * An update's metrics from its minibatch steps, in the order they ran (entropy and loss KL over
 * the first epoch only: later epochs see a policy already moved), and what came before them.
 */
export function updateMetrics(input: {
  masks: readonly (readonly number[])[];
  tooLong: number;
  usePpoValue: boolean;
  /** Per-token KL of the reward shaping (klMode 'reward'), else null. */
  rewardKl: readonly (readonly number[])[] | null;
  advantages: readonly AdvantageResult[];
  steps: readonly { epoch: number; stats: MinibatchStats }[];
}): UpdateMetrics {
  const { masks, steps } = input;
  const all = steps.map((s) => s.stats);
  const first = steps.filter((s) => s.epoch === 0).map((s) => s.stats);
  const kl = first.flatMap((s) => (s.kl !== undefined ? [s.kl] : []));
  const gn = all.map((s) => s.gradNorm);
  const skipped = all.filter((s) => !s.stepped).length;
  const advRows = input.advantages.map((a) => a.advantages);
  return {
    sequences: masks.length,
    actionTokens: masks.reduce((a, m) => a + m.reduce((x, y) => x + y, 0), 0),
    tooLong: input.tooLong,
    policyLoss: mean(all.map((s) => s.pg)),
    valueLoss: input.usePpoValue ? mean(all.flatMap((s) => (s.vf !== undefined ? [s.vf] : []))) : null,
    kl: input.rewardKl ? maskedMeanOf(input.rewardKl, masks) : kl.length ? mean(kl) : null,
    entropy: mean(first.map((s) => s.ent)),
    clipFraction: mean(all.map((s) => s.clip)),
    dualClipFraction: mean(all.map((s) => s.dual)),
    approxKl: mean(all.map((s) => s.akl)),
    gradNorm: mean(gn.filter(Number.isFinite)),
    gradNormMax: gn.reduce((a, b) => Math.max(a, b), 0),
    skippedSteps: skipped,
    optimizerSteps: gn.length - skipped,
    advantageMean: maskedMeanOf(advRows, masks),
    advantageAbsMean: maskedMeanOf(
      advRows.map((r) => r.map(Math.abs)),
      masks,
    ),
  };
}
