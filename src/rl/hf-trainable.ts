import * as tf from '@tensorflow/tfjs';
import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { llamaWeights } from '../architectures/llama/config.ts';
import type { LlamaModel } from '../architectures/llama/model.ts';
import { LlamaTfjs } from '../architectures/llama/tfjs-model.ts';
import type { Json } from '../core/types.ts';
import { HF_CHECKPOINT_FILE, HF_CHECKPOINT_FORMAT, readHfCheckpoint, type HfCheckpointJson } from '../hf/checkpoint.ts';
import { exportHf } from '../hf/export.ts';
import { loadHfModel, ModelHasher, openHfFolder, type HfChat } from '../hf/folder.ts';
import { HfChatEncoding } from '../policy/hf/chat-encoding.ts';
import { HfPolicy } from '../policy/hf/hf-policy.ts';
import type { Policy } from '../policy/policy.ts';
import { maskedIndices, padBatch } from '../policy/tfjs/score.ts';
import { chosenLogprobs } from './chunked-logprobs.ts';
import { TrainingError } from './errors.ts';
import type { RolloutSampling, ScoreOutput, ScoreRequest, TrainablePolicy } from './trainable.ts';

/**
 * A Hugging Face model of the Llama family as the trainer's TrainablePolicy: the tfjs forward
 * (LlamaTfjs) is what is differentiated; rollouts sample from the same weights on the decode kernel
 * (an HfPolicy), copied back into the model after each update. It has no value head (PPO needs one).
 *
 * A checkpoint is a Hugging Face folder (config.json, float32 model.safetensors, the tokenizer files
 * and template as they came) plus checkpoint.json: `ckpt:DIR` reads it back, and `model export`
 * and Transformers read it as the folder it is. Its version is the content hash of what it holds.
 */
export class HfTrainable implements TrainablePolicy {
  readonly maxLength: number;
  readonly hasValueHead = false;
  private hash = '';
  private readonly policies = new Map<string, HfPolicy>();

  private constructor(
    /** The folder the tokenizer, template and config come from (the base model's, or a checkpoint's). */
    readonly chat: HfChat,
    readonly model: LlamaModel,
    readonly net: LlamaTfjs,
    readonly options: { id?: string; meta?: { [key: string]: Json } } = {},
  ) {
    this.maxLength = model.contextLength;
    const template = chat.template;
    if (!template)
      throw new TrainingError(`${chat.dir} has no chat template: a base model cannot be trained on episodes`);
    this.encoding = new HfChatEncoding(chat.tokenizer, template, chat.eosTokenIds);
  }

  /** The model's chat template as token ids (what demonstrations are rendered with). */
  readonly encoding: HfChatEncoding;

  /** A Hugging Face folder (`--init hf:DIR`) or a checkpoint of one (`--init ckpt:DIR`). */
  static async load(dir: string, options: { id?: string; contextLength?: number } = {}): Promise<HfTrainable> {
    const folder = await openHfFolder(dir);
    const { model, hash } = await loadHfModel(folder, { contextLength: options.contextLength });
    const saved = await readHfCheckpoint(dir);
    if (saved && saved.hash !== hash)
      throw new TrainingError(
        `checkpoint ${dir}: content hash mismatch (stored ${saved.hash.slice(0, 12)}, computed ${hash.slice(0, 12)})`,
      );
    const t = new HfTrainable(folder, model, new LlamaTfjs(model), { id: options.id, meta: saved?.meta ?? {} });
    t.hash = hash;
    return t;
  }

  get variables(): tf.Variable[] {
    return this.net.trainableVariables;
  }

  score(req: ScoreRequest): ScoreOutput {
    return scoreLlama(this.net, req);
  }

  policy(sampling: RolloutSampling): Policy {
    const key = `${this.hash}:${sampling.temperature}:${sampling.topK ?? 0}:${sampling.topP ?? 1}`;
    let p = this.policies.get(key);
    if (!p) {
      const own = { temperature: sampling.temperature, topK: sampling.topK, topP: sampling.topP };
      p = new HfPolicy(this.options.id ?? 'rl', this.hash, this.chat, this.model, own);
      this.policies.set(key, p);
    }
    return p;
  }

  async weightsChanged(): Promise<void> {
    await this.net.writeBack();
    this.hash = await modelHash(this.chat.dir, this.model);
    // Old policies hold KV caches computed with the old weights.
    for (const p of this.policies.values()) p.clearCache();
    this.policies.clear();
  }

  version(): string {
    return this.hash;
  }

  /** Writes the checkpoint atomically (a temporary sibling renamed into place). */
  async save(dir: string): Promise<void> {
    const target = resolve(dir);
    await mkdir(dirname(target), { recursive: true });
    const tmp = join(dirname(target), `.${basename(target)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      await exportHf(this.chat, this.model, tmp, 'F32');
      const json: HfCheckpointJson = {
        format: HF_CHECKPOINT_FORMAT,
        version: 1,
        hash: this.hash,
        meta: this.options.meta ?? {},
      };
      await writeFile(join(tmp, HF_CHECKPOINT_FILE), `${JSON.stringify(json, null, 1)}\n`);
      const exists = await stat(target).then(
        () => true,
        () => false,
      );
      const old = `${tmp}.old`;
      if (exists) await rename(target, old);
      await rename(tmp, target);
      if (exists) await rm(old, { recursive: true, force: true });
    } catch (error) {
      await rm(tmp, { recursive: true, force: true });
      throw error;
    }
  }

  async load(dir: string): Promise<void> {
    const other = await HfTrainable.load(dir);
    try {
      if (JSON.stringify(other.model.config) !== JSON.stringify(this.model.config))
        throw new TrainingError(`checkpoint ${dir} holds another model (its config differs)`);
      for (const [name, v] of this.net.variables) v.assign(other.net.variables.get(name)!);
    } finally {
      other.net.dispose();
    }
    await this.weightsChanged();
  }

  async freeze() {
    const frozen = new LlamaTfjs(this.model, () => false);
    return {
      maxLength: this.maxLength,
      score: (r: ScoreRequest) => scoreLlama(frozen, r),
      dispose: () => frozen.dispose(),
    };
  }
}

/** The content hash of a model's weights with the defining files of `dir` (what its checkpoint's loadHfModel computes). */
async function modelHash(dir: string, model: LlamaModel): Promise<string> {
  const h = await ModelHasher.of(dir);
  for (const { name, shape } of llamaWeights(model.config)) h.weight(name, shape, model.weight(name));
  return h.digest();
}

/**
 * The trainer's forward pass (TrainablePolicy.score) over the Llama family: log-probs (and
 * entropies) of the selected tokens, the agent's own with a mask, all of them otherwise; the
 * vocabulary head runs on those positions only, a block of rows at a time (chosenLogprobs), and the
 * results are scattered back to [B, T].
 */
export function scoreLlama(net: LlamaTfjs, req: ScoreRequest): ScoreOutput {
  const { tokens } = padBatch(req.tokens, 0, undefined, req.length);
  const [B, T] = tokens.shape;
  const select = req.mask
    ? maskedIndices(
        req.mask.map((m) => m.slice(0, T)),
        T,
      )
    : Array.from({ length: B * (T - 1) }, (_, i) => Math.floor(i / (T - 1)) * T + (i % (T - 1)) + 1);
  try {
    return tf.tidy(() => {
      const place = (x: tf.Tensor1D | null) =>
        (x
          ? tf.unsortedSegmentSum(x, tf.tensor1d(Int32Array.from(select), 'int32'), B * T).reshape([B, T])
          : tf.zeros([B, T])) as tf.Tensor2D;
      if (select.length === 0) return { logprobs: place(null), ...(req.entropy ? { entropy: place(null) } : {}) };
      const hidden = net.hiddenStates(tokens);
      const rows = tf.gather(
        hidden,
        tf.tensor1d(
          Int32Array.from(select, (i) => i - 1),
          'int32',
        ),
      ) as tf.Tensor2D;
      const targets = tf.gather(tokens.reshape([B * T]), tf.tensor1d(Int32Array.from(select), 'int32')) as tf.Tensor1D;
      const out = chosenLogprobs(rows, net.head as unknown as tf.Tensor2D, targets, req.temperature ?? 1);
      return { logprobs: place(out.logprobs), ...(req.entropy ? { entropy: place(out.entropy) } : {}) };
    });
  } finally {
    tokens.dispose();
  }
}
