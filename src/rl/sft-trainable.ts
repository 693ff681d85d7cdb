import * as tf from '@tensorflow/tfjs';
import { createRng } from '../core/rng.ts';
import type { TokenSequence } from '../policy/trajectory.ts';
import { AdamW } from '../policy/tfjs/adamw.ts';
import {
  addMicroGradient,
  microGradient,
  sumMicroGradients,
  type MicroGradient,
} from '../policy/tfjs/data-parallel.ts';
import { padBatch } from '../policy/tfjs/score.ts';
import { SFT_ADAMW } from '../policy/tfjs/sft.ts';
import { TrainingError } from './errors.ts';
import type { TrainablePolicy } from './trainable.ts';

export interface SftOnOptions {
  /** The training sequences: each demonstration's ids, the mask on the agent's own tokens. */
  sequences: readonly TokenSequence[];
  steps: number;
  batchSize: number;
  /**
   * Sequences per forward pass (default 1): a step's batch is cut into micro-batches whose gradients
   * are added in order before the one update, so the activations held at once are a micro-batch's.
   */
  microbatch?: number;
  lr: number;
  seed: number;
  warmupSteps?: number;
  weightDecay?: number;
  clipNorm?: number;
  onStep?(stats: { step: number; steps: number; loss: number; tokensPerS: number }): void;
}

/**
 * Behaviour cloning of any trainable model (the trainer's interface, so a Hugging Face model as much
 * as the GPT): the token-mean negative log-likelihood of the agent's own tokens, AdamW with SFT's
 * settings, batches drawn in a seeded order. The weights change in place; the rollout policy
 * follows them (weightsChanged at the end).
 */
export async function sftTrainable(
  trainable: TrainablePolicy,
  options: SftOnOptions,
): Promise<{ steps: number; finalLoss: number; tailLoss: number; trainTokens: number; seconds: number }> {
  const { sequences, steps, batchSize } = options;
  const microbatch = options.microbatch ?? 1;
  if (!(Number.isInteger(microbatch) && microbatch >= 1))
    throw new TrainingError(`microbatch must be an integer ≥ 1, got ${microbatch}`);
  const usable = sequences.filter((q) => q.tokens.length <= trainable.maxLength && q.mask.some((m, t) => t > 0 && m));
  if (usable.length === 0)
    throw new TrainingError(
      `no demonstration fits the model's context (${trainable.maxLength} tokens) with an agent token in it`,
    );
  const opt = new AdamW(trainable.variables, {
    ...SFT_ADAMW,
    lr: options.lr,
    schedule: { warmupSteps: options.warmupSteps ?? Math.min(10, Math.ceil(steps / 10)), totalSteps: steps },
    weightDecay: options.weightDecay ?? 0.01,
    clipNorm: options.clipNorm ?? 1,
  });
  const rng = createRng(options.seed);
  let order: number[] = [];
  const losses: number[] = [];
  let trainTokens = 0;
  const start = performance.now();
  try {
    for (let s = 0; s < steps; s++) {
      if (order.length < batchSize) order = order.concat(rng.shuffle([...usable.keys()]));
      const batch = order.splice(0, Math.min(batchSize, usable.length)).map((i) => usable[i]!);
      // The step's token-mean NLL: each micro-batch's −Σ log π over the whole batch's count.
      const denominator = Math.max(
        1,
        batch.reduce((n, b) => n + b.mask.reduce((a, m) => a + m, 0), 0),
      );
      const t0 = performance.now();
      let sum: MicroGradient | null = null;
      let n = 0;
      for (let i = 0; i < batch.length; i += microbatch) {
        const part = batch.slice(i, i + microbatch);
        const length = Math.max(2, ...part.map((b) => b.tokens.length));
        n += part.length * length;
        const gradient = await microGradient(trainable.variables, () =>
          tf.tidy(() => {
            const tokens = part.map((b) => b.tokens);
            const { logprobs } = trainable.score({ tokens, length, mask: part.map((b) => b.mask) });
            const { mask } = padBatch(
              tokens,
              0,
              part.map((b) => b.mask),
              length,
            );
            return logprobs.mul(mask!).sum().neg().div(denominator) as tf.Scalar;
          }),
        );
        sum = sum ? addMicroGradient(sum, gradient) : gradient;
      }
      const stats = await opt.applyGradients(sum!.stats.loss!, sumMicroGradients(trainable.variables, [sum!]));
      trainTokens += n;
      losses.push(stats.loss);
      options.onStep?.({ step: s + 1, steps, loss: stats.loss, tokensPerS: (n / (performance.now() - t0)) * 1000 });
    }
  } finally {
    opt.dispose();
  }
  await trainable.weightsChanged();
  const tail = losses.slice(-Math.max(1, Math.floor(losses.length / 10)));
  return {
    steps,
    finalLoss: losses.at(-1)!,
    tailLoss: tail.reduce((a, b) => a + b, 0) / tail.length,
    trainTokens,
    seconds: (performance.now() - start) / 1000,
  };
}
