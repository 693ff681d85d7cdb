import { z } from 'zod';
import type { AdvantageEstimator } from './advantages.ts';
import { TrainingError } from './errors.ts';
import { KL_ESTIMATORS } from './kl.ts';
import { LOSS_AGGREGATIONS } from './losses.ts';

export const ALGORITHMS = ['grpo', 'ppo', 'reinforce++', 'rloo'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

/** Which advantage estimator each algorithm uses. */
export const ESTIMATOR_OF: Record<Algorithm, AdvantageEstimator> = {
  grpo: 'grpo',
  ppo: 'gae',
  'reinforce++': 'reinforce++',
  rloo: 'rloo',
};

/**
 * Everything that determines a training run. Saved in the run directory; `--resume` refuses a
 * directory whose config differs, since the result would match neither run.
 */
export const TrainConfigSchema = z.object({
  algo: z.enum(ALGORITHMS),
  seed: z.number().int(),
  /** Optimizer steps (rollout batches). */
  steps: z.number().int().min(1),
  /** Distinct tasks per rollout batch. */
  tasksPerStep: z.number().int().min(1),
  /** Samples per task (GRPO/RLOO groups; PPO and REINFORCE++ use them too, as extra samples). */
  group: z.number().int().min(1),
  /** Passes over each rollout batch. */
  epochs: z.number().int().min(1),
  /** Sequences per minibatch (one optimizer step each). */
  minibatch: z.number().int().min(1),
  /** Sequences per forward/backward pass; a minibatch's gradients are accumulated over them (memory). */
  microbatch: z.number().int().min(1),
  lr: z.number().positive(),
  /** Critic learning rate multiplier is not separate: one optimizer over policy and value head. */
  weightDecay: z.number().min(0),
  maxGradNorm: z.number().positive(),
  clipLow: z.number().min(0).max(0.99),
  clipHigh: z.number().min(0),
  dualClip: z.number().gt(1).nullable(),
  aggregation: z.enum(LOSS_AGGREGATIONS),
  gamma: z.number().min(0).max(1),
  lambda: z.number().min(0).max(1),
  normByStd: z.boolean(),
  /** KL to the frozen initial policy: off, as a reward penalty, or as a loss term. */
  klMode: z.enum(['none', 'reward', 'loss']),
  klEstimator: z.enum(KL_ESTIMATORS),
  klCoef: z.number().min(0),
  entropyCoef: z.number().min(0),
  valueCoef: z.number().min(0),
  valueClip: z.number().min(0),
  temperature: z.number().positive(),
  /** Eval on `dev` before training, every this many steps and after the last (0: no eval). */
  evalEvery: z.number().int().min(0),
  evalEpisodes: z.number().int().min(1),
  /** Checkpoint every this many steps (and always at the end). */
  checkpointEvery: z.number().int().min(1),
  trainSplit: z.string().min(1),
  evalSplit: z.string().min(1),
  /** Size of the pool of training tasks the batches are drawn from. */
  taskPool: z.number().int().min(1),
  /** Episodes in flight at once during rollouts. */
  concurrency: z.number().int().min(1),
});
export type TrainConfig = z.infer<typeof TrainConfigSchema>;

const COMMON: Omit<TrainConfig, 'algo' | 'klMode' | 'klEstimator' | 'klCoef'> = {
  seed: 1,
  steps: 20,
  tasksPerStep: 8,
  group: 4,
  epochs: 1,
  minibatch: 16,
  microbatch: 8,
  lr: 1e-4,
  weightDecay: 0,
  maxGradNorm: 1,
  clipLow: 0.2,
  clipHigh: 0.28,
  dualClip: 3,
  aggregation: 'token-mean',
  gamma: 1,
  lambda: 1,
  normByStd: true,
  entropyCoef: 0,
  valueCoef: 0.5,
  valueClip: 0.2,
  temperature: 1,
  evalEvery: 5,
  evalEpisodes: 32,
  checkpointEvery: 5,
  trainSplit: 'train',
  evalSplit: 'dev',
  taskPool: 1000,
  concurrency: 64,
};

/** Defaults per algorithm, as in verl's example configs (GRPO/RLOO: k3 KL loss; REINFORCE++: KL in the reward). */
export function defaultConfig(algo: Algorithm): TrainConfig {
  const kl =
    algo === 'ppo'
      ? ({ klMode: 'none', klEstimator: 'k1', klCoef: 0 } as const)
      : algo === 'reinforce++'
        ? ({ klMode: 'reward', klEstimator: 'k1', klCoef: 0.001 } as const)
        : ({ klMode: 'loss', klEstimator: 'k3', klCoef: 0.001 } as const);
  // γ = λ = 1 as verl's defaults. (λ = 0.95 with an untrained value head (V ≈ 0) collapsed PPO on the
  // quick multihop budget: entropy went to uniform after one update; λ = 1 did not.)
  return { ...COMMON, algo, ...kl };
}

/** Defaults for the algorithm, then the overrides; throws a readable error on a bad value. */
export function resolveConfig(overrides: Omit<Partial<TrainConfig>, 'algo'> & { algo: string }): TrainConfig {
  if (!(ALGORITHMS as readonly string[]).includes(overrides.algo)) {
    throw new TrainingError(`unknown algorithm "${overrides.algo}"; valid: ${ALGORITHMS.join(', ')}`);
  }
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
  const parsed = TrainConfigSchema.safeParse({ ...defaultConfig(overrides.algo as Algorithm), ...defined });
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new TrainingError(`bad training config: ${issues}`);
  }
  return parsed.data;
}
