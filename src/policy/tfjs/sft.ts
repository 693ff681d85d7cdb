import * as tf from '@tensorflow/tfjs';
import { AgentR1Error } from '../../core/errors.ts';
import { createRng } from '../../core/rng.ts';
import type { EpisodeRecord } from '../../core/types.ts';
import type { PolicyEncoding } from '../policy.ts';
import { recordTokens, type TokenSequence } from '../trajectory.ts';
import { AdamW, type AdamWOptions, type StepStats } from './adamw.ts';
import { chatEncoding } from './chat-template.ts';
import { DEFAULT_MODEL_CONFIG, type ModelConfig } from './model-config.ts';
import { GPTModel } from './model.ts';
import { maskedIndices, padBatch, scoreTokens } from './score.ts';
import { trainTokenizer, type Chunking, type Tokenizer } from './tokenizer.ts';

/**
 * Behaviour cloning on episode records: the loss is the negative log-likelihood of the agent's own
 * tokens only (prompt, tool responses and template tokens have mask 0).
 */
export class SftError extends AgentR1Error {}

/**
 * Token sequences from records, built exactly as live play builds the history (recordTokens): the
 * prompt, each action, its observation in the chat template (or the end tokens after the last
 * action), cut to `contextLength`; records without an agent token left are dropped. The texts are
 * encoded with `encoding` (`useRecordTokens` takes the recorded ids where there are some instead:
 * only right when they come from this tokenizer).
 */
export function sequencesFromRecords(
  records: readonly EpisodeRecord[],
  encoding: PolicyEncoding & { action(text: string): number[] },
  options: { useRecordTokens?: boolean; contextLength?: number; onlySuccessful?: boolean } = {},
): TokenSequence[] {
  const out: TokenSequence[] = [];
  for (const r of records) {
    if (options.onlySuccessful && !r.outcome.success) continue;
    const { tokens, mask } = recordTokens(r, { encoding, useRecordTokens: options.useRecordTokens ?? false });
    if (options.contextLength && tokens.length > options.contextLength) {
      tokens.length = options.contextLength;
      mask.length = options.contextLength;
    }
    if (mask.some((m) => m === 1)) out.push({ tokens, mask });
  }
  return out;
}

/** Every text of the records, for training the tokenizer (prompts, actions, observations). */
export function recordTexts(records: readonly EpisodeRecord[]): string[] {
  const texts: string[] = [];
  for (const r of records) {
    for (const m of r.prompt) texts.push(m.content);
    for (const t of r.turns) {
      texts.push(t.text);
      if (t.observation !== null) texts.push(t.observation);
    }
  }
  return texts;
}

/**
 * SFT's optimizer settings besides the rate, schedule, decay and clip norm: β2 0.95, the decay
 * added to the update, and the clip scale clipNorm / ‖g‖ (no ε). Its results were made with these.
 */
export const SFT_ADAMW = { beta2: 0.95, decayForm: 'optax', clipEps: 0 } as const satisfies Partial<AdamWOptions>;

export interface SftOptions {
  records: readonly EpisodeRecord[];
  /** A tokenizer to use; otherwise one is trained on the records (vocabSize). */
  tokenizer?: Tokenizer;
  vocabSize?: number;
  /** Tokenizer pre-tokenization (default `space-words`; `words` lets a copy head copy names). */
  chunking?: Chunking;
  model?: Partial<Omit<ModelConfig, 'vocabSize'>>;
  seed?: number;
  /** Optimizer steps (default: epochs over the data). */
  steps?: number;
  epochs?: number;
  batchSize?: number;
  lr?: number;
  warmupSteps?: number;
  weightDecay?: number;
  clipNorm?: number;
  /** Imitate only the records that succeeded (default true). */
  onlySuccessful?: boolean;
  /** Called after every step (the CLI draws its progress bar from it). */
  onStep?: (stats: StepStats & { tokensPerSecond: number; totalSteps: number; tokens: number }) => void;
}

export interface SftResult {
  model: GPTModel;
  tokenizer: Tokenizer;
  steps: number;
  finalLoss: number;
  /** Mean loss over the last 10% of steps. */
  tailLoss: number;
  sequences: number;
  trainTokens: number;
  seconds: number;
}

/** Trains a fresh model (and tokenizer, unless given) on the records. Deterministic for a seed. */
export function trainSft(options: SftOptions): SftResult {
  const seed = options.seed ?? 0;
  if (options.records.length === 0) throw new SftError('no records to train on');
  const tokenizer =
    options.tokenizer ??
    trainTokenizer(recordTexts(options.records), { vocabSize: options.vocabSize ?? 1024, chunking: options.chunking });
  const config: ModelConfig = { ...DEFAULT_MODEL_CONFIG, ...options.model, vocabSize: tokenizer.vocabSize };
  if (options.model?.dModel && !options.model.dMlp) config.dMlp = 4 * config.dModel;
  const encoding = chatEncoding(tokenizer);
  const onlySuccessful = options.onlySuccessful ?? true;
  const sequences = sequencesFromRecords(options.records, encoding, {
    contextLength: config.contextLength,
    onlySuccessful,
  });
  if (sequences.length === 0)
    throw new SftError(`no ${onlySuccessful ? 'successful ' : ''}records with agent tokens to train on`);
  const model = new GPTModel(config, seed);
  const batchSize = Math.max(1, options.batchSize ?? 8);
  const perEpoch = Math.ceil(sequences.length / batchSize);
  // Small models sit on a plateau for ~300 steps before they learn to copy numbers: the default
  // budget (600 steps of 8) is sized for that, not for epochs.
  const steps = options.steps ?? (options.epochs !== undefined ? perEpoch * options.epochs : 600);
  if (!(steps >= 1)) throw new SftError(`steps must be ≥ 1, got ${steps}`);
  const opt = new AdamW(model.trainableVariables, {
    ...SFT_ADAMW,
    lr: options.lr ?? 1e-2,
    schedule: { warmupSteps: options.warmupSteps ?? Math.min(30, Math.ceil(steps / 10)), totalSteps: steps },
    weightDecay: options.weightDecay ?? 0.01,
    clipNorm: options.clipNorm ?? 1,
  });
  const rng = createRng(seed);
  let order: number[] = [];
  const losses: number[] = [];
  let trainTokens = 0;
  const start = performance.now();
  try {
    for (let s = 0; s < steps; s++) {
      if (order.length < batchSize) order = order.concat(rng.shuffle([...sequences.keys()]));
      const batch = order.splice(0, batchSize).map((i) => sequences[i]!);
      const { tokens, length } = padBatch(
        batch.map((b) => b.tokens),
        tokenizer.pad,
      );
      const select = maskedIndices(
        batch.map((b) => b.mask),
        length,
      );
      const t0 = performance.now();
      // Token-mean NLL of the agent's tokens, computed at those positions only.
      const stats = opt.minimize(() =>
        tf.tidy(() => scoreTokens(model, tokens, select).logprobs.mean().neg() as tf.Scalar),
      );
      const ms = performance.now() - t0;
      const n = tokens.shape[0] * tokens.shape[1];
      trainTokens += n;
      tokens.dispose();
      losses.push(stats.loss);
      options.onStep?.({ ...stats, tokensPerSecond: (n / ms) * 1000, totalSteps: steps, tokens: trainTokens });
    }
  } finally {
    opt.dispose();
  }
  const tail = losses.slice(-Math.max(1, Math.floor(losses.length / 10)));
  return {
    model,
    tokenizer,
    steps,
    finalLoss: losses.at(-1)!,
    tailLoss: tail.reduce((a, b) => a + b, 0) / tail.length,
    sequences: sequences.length,
    trainTokens,
    seconds: (performance.now() - start) / 1000,
  };
}
