import * as tf from '@tensorflow/tfjs';
import { performance } from 'node:perf_hooks';
import { createRng, deriveSeed } from '../core/rng.ts';
import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import { chatEncoding } from '../policy/tfjs/chat-template.ts';
import { DEFAULT_MODEL_CONFIG, GPTModel, type ModelConfig } from '../policy/tfjs/model.ts';
import { padBatch, scoreSequences } from '../policy/tfjs/score.ts';
import { recordTexts, sequencesFromRecords } from '../policy/tfjs/sft.ts';
import { trainTokenizer } from '../policy/tfjs/tokenizer.ts';
import { AdamW as ScheduledAdamW, maskedNll } from '../policy/tfjs/train-step.ts';
import { rollout } from '../rollout/rollout.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { TrainingError } from './errors.ts';
import { GptTrainable } from './tfjs-trainable.ts';

/**
 * The supervised warm start ("Base Tool Call"): episodes from a demonstration policy, a tokenizer
 * trained on their text, and a fresh GPT trained to imitate every demonstration — the imperfect
 * ones too (a noisy expert that answers after too few searches, or answers a distractor), which
 * is what leaves RL room to improve on it.
 */
export interface WarmStartOptions {
  scenario: Scenario;
  demoPolicy: Policy;
  /** Demonstration episodes. */
  episodes: number;
  seed: number;
  split?: string;
  vocabSize?: number;
  model?: Partial<Omit<ModelConfig, 'vocabSize'>>;
  /** Optimizer steps. */
  steps: number;
  batchSize?: number;
  lr?: number;
  warmupSteps?: number;
  weightDecay?: number;
  /** Imitate only the demonstrations that succeeded (default false: all of them). */
  onlySuccessful?: boolean;
  episode?: Partial<EpisodeConfig>;
  onStep?(stats: { step: number; steps: number; loss: number; tokensPerS: number }): void;
}

export interface WarmStartResult {
  trainable: GptTrainable;
  demos: RolloutSummary;
  /** Demonstrations trained on, and their share that succeeded. */
  sequences: number;
  demoSuccess: number;
  steps: number;
  finalLoss: number;
  seconds: number;
  parameters: number;
}

export async function sftWarmStart(options: WarmStartOptions): Promise<WarmStartResult> {
  const t0 = performance.now();
  const { records, summary } = await rollout({
    scenario: options.scenario,
    policy: options.demoPolicy,
    split: options.split ?? 'train',
    episodes: options.episodes,
    seed: deriveSeed(options.seed, 'demos'),
    concurrency: 16,
    config: options.episode,
    onRecord: () => {},
  });
  const used: EpisodeRecord[] = records.filter((r) => r.status === 'ok' && (!options.onlySuccessful || r.outcome.success));
  if (used.length === 0) throw new TrainingError(`the ${options.demoPolicy.id} policy produced no usable demonstrations`);
  const tokenizer = trainTokenizer(recordTexts(used), { vocabSize: options.vocabSize ?? 768 });
  const config: ModelConfig = { ...DEFAULT_MODEL_CONFIG, ...options.model, vocabSize: tokenizer.vocabSize };
  if (options.model?.dModel && !options.model.dMlp) config.dMlp = 4 * config.dModel;
  const sequences = sequencesFromRecords(used, chatEncoding(tokenizer), { contextLength: config.contextLength });
  const model = new GPTModel(config, options.seed);
  const batchSize = options.batchSize ?? 16;
  const opt = new ScheduledAdamW(model.trainableVariables, {
    lr: options.lr ?? 3e-3,
    warmupSteps: options.warmupSteps ?? Math.min(10, Math.ceil(options.steps / 10)),
    totalSteps: options.steps,
    weightDecay: options.weightDecay ?? 0.01,
    clipNorm: 1,
  });
  const rng = createRng(deriveSeed(options.seed, 'sft-order'));
  let order: number[] = [];
  let loss = NaN;
  try {
    for (let s = 0; s < options.steps; s++) {
      if (order.length < batchSize) order = order.concat(rng.shuffle([...sequences.keys()]));
      const batch = order.splice(0, batchSize).map((i) => sequences[i]!);
      const { tokens, mask } = padBatch(batch.map((b) => b.tokens), tokenizer.pad, batch.map((b) => b.mask));
      const ts = performance.now();
      try {
        loss = opt.minimize(() => maskedNll(scoreSequences(model, { tokens }).logprobs, mask!)).loss;
      } finally {
        tf.dispose([tokens, mask!]);
      }
      const n = batch.reduce((a, b) => a + b.tokens.length, 0);
      options.onStep?.({ step: s + 1, steps: options.steps, loss, tokensPerS: n / ((performance.now() - ts) / 1000) });
    }
  } finally {
    opt.dispose();
  }
  const demoSuccess = used.filter((r) => r.outcome.success).length / used.length;
  return {
    trainable: new GptTrainable(model, tokenizer, {
      id: 'rl',
      meta: { warmStart: { demoPolicy: options.demoPolicy.id, episodes: used.length, steps: options.steps, demoSuccess } },
    }),
    demos: summary,
    sequences: sequences.length,
    demoSuccess,
    steps: options.steps,
    finalLoss: loss,
    seconds: (performance.now() - t0) / 1000,
    parameters: model.parameterCount(),
  };
}
