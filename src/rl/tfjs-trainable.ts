import * as tf from '@tensorflow/tfjs';
import type { Json } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import { contentHash, loadCheckpoint, saveCheckpoint } from '../policy/tfjs/checkpoint.ts';
import { GPTModel } from '../architectures/gpt/model.ts';
import { maskedIndices, padBatch, scoreSequences, scoreTokens } from '../policy/tfjs/score.ts';
import { TfjsPolicy } from '../policy/tfjs/tfjs-policy.ts';
import type { Tokenizer } from '../policy/tfjs/tokenizer.ts';
import { TrainingError } from './errors.ts';
import type { RolloutSampling, ScoreOutput, ScoreRequest, TrainablePolicy } from './trainable.ts';

/**
 * The tfjs GPT policy (src/policy/tfjs) as the trainer's TrainablePolicy. Its version is the same
 * content hash a checkpoint of these weights gets, so a record's policy version names the
 * checkpoint that can replay it.
 */
export class GptTrainable implements TrainablePolicy {
  readonly maxLength: number;
  readonly hasValueHead = true;
  private hash = '';
  private readonly policies = new Map<string, TfjsPolicy>();

  private constructor(
    readonly model: GPTModel,
    readonly tokenizer: Tokenizer,
    readonly options: { id?: string; meta?: { [key: string]: Json } } = {},
  ) {
    this.maxLength = model.config.contextLength;
  }

  /** Wraps a model; async because its version hashes the weights, read with data() (a GPU backend has no sync read). */
  static async create(
    model: GPTModel,
    tokenizer: Tokenizer,
    options: { id?: string; meta?: { [key: string]: Json } } = {},
  ): Promise<GptTrainable> {
    const t = new GptTrainable(model, tokenizer, options);
    await t.weightsChanged();
    return t;
  }

  /** Loads a checkpoint directory (`--init ckpt:DIR`). */
  static async fromCheckpoint(dir: string, options: { id?: string } = {}): Promise<GptTrainable> {
    const ckpt = await loadCheckpoint(dir);
    return GptTrainable.create(ckpt.model, ckpt.tokenizer, { id: options.id, meta: ckpt.meta });
  }

  get variables(): tf.Variable[] {
    return this.model.trainableVariables;
  }

  score(req: ScoreRequest): ScoreOutput {
    return scoreGpt(this.model, this.tokenizer.pad, req);
  }

  policy(sampling: RolloutSampling): Policy {
    const key = `${this.hash}:${sampling.temperature}:${sampling.topK ?? 0}:${sampling.topP ?? 1}`;
    let p = this.policies.get(key);
    if (!p) {
      p = new TfjsPolicy({
        id: this.options.id ?? 'rl',
        version: this.hash,
        model: this.model,
        tokenizer: this.tokenizer,
        sampling: { temperature: sampling.temperature, topK: sampling.topK, topP: sampling.topP },
      });
      this.policies.set(key, p);
    }
    return p;
  }

  async weightsChanged(): Promise<void> {
    // Same bytes and order as saveCheckpoint's encodeWeights (float32, namedWeights order).
    const weights = this.model.namedWeights().map(([, v]) => {
      if (v.dtype !== 'float32') throw new TrainingError(`weight ${v.name} is ${v.dtype}; expected float32`);
      return v;
    });
    const parts = (await Promise.all(weights.map((v) => v.data()))).map((d) => {
      const f = d as Float32Array;
      return new Uint8Array(f.buffer, f.byteOffset, f.byteLength);
    });
    const bytes = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
    let at = 0;
    for (const p of parts) {
      bytes.set(p, at);
      at += p.byteLength;
    }
    this.hash = contentHash(this.model.config, this.tokenizer.toJSON(), bytes);
    // Old policies hold KV caches computed with the old weights.
    for (const p of this.policies.values()) p.clearCache();
    this.policies.clear();
  }

  version(): string {
    return this.hash;
  }

  async save(dir: string): Promise<void> {
    const hash = await saveCheckpoint(dir, this.model, this.tokenizer, { ...(this.options.meta ?? {}) });
    if (hash !== this.hash)
      throw new TrainingError(
        `checkpoint hash ${hash.slice(0, 12)} differs from the policy version ${this.hash.slice(0, 12)}`,
      );
  }

  async load(dir: string): Promise<void> {
    const ckpt = await loadCheckpoint(dir);
    try {
      const mine = this.model.namedWeights();
      const theirs = ckpt.model.namedWeights();
      if (mine.length !== theirs.length) throw new TrainingError(`checkpoint ${dir} has another architecture`);
      mine.forEach(([name, v], i) => {
        const [otherName, w] = theirs[i]!;
        if (name !== otherName || v.shape.join(',') !== w.shape.join(',')) {
          throw new TrainingError(
            `checkpoint ${dir}: weight ${otherName} [${w.shape}] does not fit ${name} [${v.shape}]`,
          );
        }
        v.assign(w);
      });
    } finally {
      ckpt.model.dispose();
    }
    await this.weightsChanged();
  }

  async freeze() {
    const weights = new Map<string, tf.Tensor>(this.model.namedWeights().map(([name, v]) => [name, v.clone()]));
    const frozen = new GPTModel(this.model.config, 0, weights);
    for (const t of weights.values()) t.dispose();
    const pad = this.tokenizer.pad;
    return {
      maxLength: this.maxLength,
      score: (r: ScoreRequest) => scoreGpt(frozen, pad, r),
      dispose: () => frozen.dispose(),
    };
  }
}

/**
 * The trainer's forward pass over a GPT (TrainablePolicy.score), rows right-padded with `pad`; with
 * a mask, only the masked positions are scored (the output head and copy head are most of the
 * cost) and scattered back to [B, T]. A training replica in a worker thread runs the same function.
 */
export function scoreGpt(model: GPTModel, pad: number, req: ScoreRequest): ScoreOutput {
  const { tokens } = padBatch(req.tokens, pad, undefined, req.length);
  try {
    if (req.mask) return scoreMasked(model, tokens, req);
    const out = scoreSequences(model, { tokens }, { temperature: req.temperature });
    if (!req.values) out.values.dispose();
    if (!req.entropy) out.entropy.dispose();
    return {
      logprobs: out.logprobs,
      ...(req.values ? { values: out.values } : {}),
      ...(req.entropy ? { entropy: out.entropy } : {}),
    };
  } finally {
    tokens.dispose();
  }
}

function scoreMasked(model: GPTModel, tokens: tf.Tensor2D, req: ScoreRequest): ScoreOutput {
  const [B, T] = tokens.shape;
  const select = maskedIndices(
    req.mask!.map((m) => m.slice(0, T)),
    T,
  );
  return tf.tidy(() => {
    const out = select.length > 0 ? scoreTokens(model, tokens, select, { temperature: req.temperature }) : null;
    const ids = tf.tensor1d(Int32Array.from(select), 'int32');
    const place = (x: tf.Tensor1D | undefined) =>
      (x ? tf.unsortedSegmentSum(x, ids, B * T).reshape([B, T]) : tf.zeros([B, T])) as tf.Tensor2D;
    return {
      logprobs: place(out?.logprobs),
      ...(req.values ? { values: place(out?.values) } : {}),
      ...(req.entropy ? { entropy: place(out?.entropy) } : {}),
    };
  });
}
