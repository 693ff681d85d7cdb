import * as tf from '@tensorflow/tfjs';
import { AgentR1Error, UsageError } from '../../core/errors.ts';
import { createRng } from '../../core/rng.ts';
import type { EpisodeRecord } from '../../core/types.ts';
import type { PolicyEncoding } from '../policy.ts';
import { isStepLevel } from '../../record/step-context.ts';
import { recordStepTokens, recordTokens, type TokenSequence } from '../trajectory.ts';
import { AdamW, type AdamWOptions, type StepStats } from './adamw.ts';
import { chatEncoding } from './chat-template.ts';
import { microGradient, sumMicroGradients, type GradientExecutor, type MicroGradient } from './data-parallel.ts';
import { DEFAULT_MODEL_CONFIG, type ModelConfig } from '../../architectures/gpt/model-config.ts';
import { GPTModel } from '../../architectures/gpt/model.ts';
import { maskedIndices, padBatch, scoreTokens } from './score.ts';
import { trainTokenizer, type Chunking, type Tokenizer } from './tokenizer.ts';

/**
 * Behaviour cloning on episode records: the loss is the negative log-likelihood of the agent's own
 * tokens only (prompt, tool responses and template tokens have mask 0).
 */
export class SftError extends AgentR1Error {}

/** What the model's context cut off the training sequences: how many, of how many, and the longest. */
export interface ContextCut {
  sequences: number;
  of: number;
  /** The longest sequence, in tokens: the context that would hold every one. */
  longest: number;
  contextLength: number;
}

/**
 * Training sequences longer than the model's context, refused (`overContext: 'refuse'`): cut, they
 * would lose their last actions (the answer), and the model would learn episodes that never end.
 */
export class SftContextError extends UsageError {
  constructor(readonly cut: ContextCut) {
    super(
      `${cut.sequences} of ${cut.of} training sequences are longer than the context of ${cut.contextLength} tokens ` +
        `(the longest: ${cut.longest} tokens, ${cut.longest - cut.contextLength} over); cut, they would lose their last ` +
        `actions: give the model a context of at least ${cut.longest} tokens`,
    );
  }
}

/**
 * Token sequences from records, built exactly as live play builds the history (recordTokens): the
 * prompt, each action, its observation in the chat template (or the end tokens after the last
 * action), cut to `contextLength`; records without an agent token left are dropped. A step-level
 * record gives one sequence per step (recordStepTokens). The texts are
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
    const how = { encoding, useRecordTokens: options.useRecordTokens ?? false };
    // A step-level episode is one sample per step: what the ToolEnv showed, then the action.
    for (const { tokens, mask } of isStepLevel(r) ? recordStepTokens(r, how) : [recordTokens(r, how)]) {
      if (options.contextLength && tokens.length > options.contextLength) {
        tokens.length = options.contextLength;
        mask.length = options.contextLength;
      }
      if (mask.some((m) => m === 1)) out.push({ tokens, mask });
    }
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
      // What a step-level context adds (a state card, a summary) is text the policy reads too.
      for (const m of t.context?.messages ?? []) texts.push(m.content);
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
  /**
   * Sequences longer than the model's context: cut to it (default; the result says how many), or
   * refused with an SftContextError before training (what `agent-r1 sft` does).
   */
  overContext?: 'cut' | 'refuse';
  /**
   * Sequences per micro-batch (default 1): each step's batch is cut into micro-batches whose
   * gradients are summed in order, whatever computes them, so the weights do not depend on `replicas`.
   */
  microBatch?: number;
  /** Model replicas in other threads that compute the micro-batches (default: all on this thread). */
  replicas?: GradientExecutor;
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
  /** Sequences the context cut (absent when none was). */
  cut?: ContextCut;
}

/** One SFT micro-batch, as sent to a replica: its sequences, and the step's count of agent tokens. */
export interface SftMicroJob {
  tokens: number[][];
  masks: number[][];
  pad: number;
  /** Agent tokens in the whole step's batch: the micro-batches' losses add up to the step's mean. */
  denominator: number;
}

/**
 * The gradient of one micro-batch's share of the step's loss, −Σ log π(agent tokens) / denominator,
 * computed at the agent's positions only (a replica computes exactly this).
 */
export async function sftMicroGradient(model: GPTModel, job: SftMicroJob, out?: Float32Array): Promise<MicroGradient> {
  const { tokens } = padBatch(job.tokens, job.pad);
  try {
    const select = maskedIndices(job.masks, tokens.shape[1]);
    // nothing to imitate (agent tokens only at position 0): no gradient, no loss
    if (select.length === 0) return { grads: out ?? new Float32Array(0), present: [], stats: { loss: 0 } };
    return await microGradient(
      model.trainableVariables,
      () => tf.tidy(() => tf.div(tf.neg(tf.sum(scoreTokens(model, tokens, select).logprobs)), job.denominator)),
      out,
    );
  } finally {
    tokens.dispose();
  }
}

/**
 * Trains a fresh model (and tokenizer, unless given) on the records. Deterministic for a seed, and
 * the same weights whatever `replicas` computes the micro-batches.
 */
export async function trainSft(options: SftOptions): Promise<SftResult> {
  const seed = options.seed ?? 0;
  if (options.records.length === 0) throw new SftError('no records to train on');
  const tokenizer =
    options.tokenizer ??
    trainTokenizer(recordTexts(options.records), { vocabSize: options.vocabSize ?? 1024, chunking: options.chunking });
  const config: ModelConfig = { ...DEFAULT_MODEL_CONFIG, ...options.model, vocabSize: tokenizer.vocabSize };
  if (options.model?.dModel && !options.model.dMlp) config.dMlp = 4 * config.dModel;
  const encoding = chatEncoding(tokenizer);
  const onlySuccessful = options.onlySuccessful ?? true;
  const whole = sequencesFromRecords(options.records, encoding, { onlySuccessful });
  const over = whole.filter((q) => q.tokens.length > config.contextLength);
  const cut: ContextCut | undefined =
    over.length === 0
      ? undefined
      : {
          sequences: over.length,
          of: whole.length,
          longest: Math.max(...over.map((q) => q.tokens.length)),
          contextLength: config.contextLength,
        };
  if (cut && options.overContext === 'refuse') throw new SftContextError(cut);
  const sequences = cut ? cutToContext(whole, config.contextLength) : whole;
  if (sequences.length === 0) {
    // Every one was cut before its first action: the context is the cause, and says what would hold them.
    if (cut) throw new SftContextError(cut);
    throw new SftError(`no ${onlySuccessful ? 'successful ' : ''}records with agent tokens to train on`);
  }
  const batchSize = Math.max(1, options.batchSize ?? 8);
  const microBatch = options.microBatch ?? 1;
  if (!(Number.isInteger(microBatch) && microBatch >= 1))
    throw new SftError(`microBatch must be an integer ≥ 1, got ${microBatch}`);
  const perEpoch = Math.ceil(sequences.length / batchSize);
  // Small models sit on a plateau for ~300 steps before they learn to copy numbers: the default
  // budget (900 steps of 8) is sized for that, not for epochs: at 600, one calculator seed in five
  // (seed 3) was still on its way down (70% test success; 94% at 900).
  const steps = options.steps ?? (options.epochs !== undefined ? perEpoch * options.epochs : 900);
  if (!(steps >= 1)) throw new SftError(`steps must be ≥ 1, got ${steps}`);
  const model = new GPTModel(config, seed);
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
      const agentTokens = batch.reduce((n, b) => n + b.mask.reduce((a, m, t) => a + (t > 0 ? m : 0), 0), 0);
      const denominator = Math.max(1, agentTokens);
      const jobs: SftMicroJob[] = [];
      let n = 0;
      for (let i = 0; i < batch.length; i += microBatch) {
        const part = batch.slice(i, i + microBatch);
        jobs.push({
          tokens: part.map((b) => b.tokens),
          masks: part.map((b) => b.mask),
          pad: tokenizer.pad,
          denominator,
        });
        n += part.length * Math.max(2, ...part.map((b) => b.tokens.length));
      }
      const t0 = performance.now();
      const parts: MicroGradient[] = [];
      if (options.replicas) parts.push(...(await options.replicas.gradients(model, 'sft', jobs)));
      else for (const job of jobs) parts.push(await sftMicroGradient(model, job));
      // The step's token-mean NLL: the micro-batches' shares, added in order.
      const loss = parts.reduce((a, p) => a + p.stats.loss!, 0);
      const stats = await opt.applyGradients(loss, sumMicroGradients(model.trainableVariables, parts));
      const ms = performance.now() - t0;
      trainTokens += n;
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
    ...(cut ? { cut } : {}),
  };
}

/** Sequences cut to the context; those with no agent token left are dropped. */
function cutToContext(sequences: readonly TokenSequence[], contextLength: number): TokenSequence[] {
  return sequences
    .map((q) =>
      q.tokens.length > contextLength
        ? { tokens: q.tokens.slice(0, contextLength), mask: q.mask.slice(0, contextLength) }
        : q,
    )
    .filter((q) => q.mask.some((m) => m === 1));
}
