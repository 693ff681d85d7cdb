import * as tf from '@tensorflow/tfjs';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import {
  LLAMA_LORA_TARGETS,
  heldBytes,
  llamaWeights,
  maxWeightBytes,
  memoryBudgetText,
  parameterCount,
  type LlamaConfig,
} from '../architectures/llama/config.ts';
import { kernelThreads } from '../architectures/kernel/kernel-host.ts';
import type { LlamaModel } from '../architectures/llama/model.ts';
import { LlamaTfjs } from '../architectures/llama/tfjs-model.ts';
import { checkLoraConfig, initLora, type LoraAdapters, type LoraConfig } from '../architectures/lora.ts';
import type { Json } from '../core/types.ts';
import { ModelFileError } from '../formats/errors.ts';
import { readSafetensorsHeader, readTensor, writeSafetensors } from '../formats/safetensors.ts';
import {
  HF_CHECKPOINT_FILE,
  HF_CHECKPOINT_FORMAT,
  loadModelDir,
  openModelDir,
  readHfCheckpoint,
  type HfCheckpointJson,
} from '../hf/checkpoint.ts';
import { exportHf } from '../hf/export.ts';
import { hashModel, type HfChat } from '../hf/folder.ts';
import { loraWeights, readPeftAdapter, writePeftAdapter } from '../hf/peft.ts';
import { HfChatEncoding } from '../policy/hf/chat-encoding.ts';
import { HfPolicy } from '../policy/hf/hf-policy.ts';
import type { Policy } from '../policy/policy.ts';
import { maskedIndices, padBatch } from '../policy/tfjs/score.ts';
import { chosenLogprobs } from './chunked-logprobs.ts';
import { TrainingError } from './errors.ts';
import type { RolloutSampling, ScoreOutput, ScoreRequest, TrainablePolicy } from './trainable.ts';

const VALUE_HEAD_FILE = 'value_head.safetensors';
let nextValueHead = 0;

/** A PPO checkpoint's value head, checked against the model's hidden size. */
async function readValueHead(dir: string, d: number): Promise<{ w: Float32Array; b: Float32Array }> {
  const file = join(dir, VALUE_HEAD_FILE);
  if (!existsSync(file))
    throw new TrainingError(`checkpoint ${dir} has no ${VALUE_HEAD_FILE}: it was not trained with PPO`);
  const entries = new Map((await readSafetensorsHeader(file)).tensors.map((e) => [e.name, e]));
  const read = async (name: string, n: number) => {
    const e = entries.get(name);
    if (e?.shape.length !== 1 || e.shape[0] !== n)
      throw new ModelFileError(file, name, `must be a float tensor of shape [${n}] (the model's hidden size)`);
    return readTensor(e);
  };
  return { w: await read('value.weight', d), b: await read('value.bias', 1) };
}

/** LoRA as asked for on the command line (`--lora R --lora-alpha A`); the targets are every projection. */
export interface LoraRequest {
  rank: number;
  alpha: number;
}

/**
 * A Hugging Face model of the Llama family as the trainer's TrainablePolicy: the tfjs forward
 * (LlamaTfjs) is what is differentiated; rollouts sample from the same weights on the decode kernel
 * (an HfPolicy), copied back into the model after each update. It has no value head (PPO needs one).
 *
 * Full fine-tuning trains every weight, and a checkpoint is a Hugging Face folder (config.json,
 * float32 model.safetensors, the tokenizer files and template as they came) plus checkpoint.json.
 * With LoRA the base stays frozen, only the adapters train (and sit in the optimizer), the kernel
 * samples from the merged weights, and a checkpoint is the adapters in PEFT's files plus
 * checkpoint.json naming the base folder and its hash. `ckpt:DIR` reads either back, `model export`
 * merges; the version is the content hash of the model it computes. For PPO a value head (a linear
 * map of the final hidden state, zero at first) trains beside them and is saved as
 * value_head.safetensors; it is not part of the policy, nor of its version.
 */
export class HfTrainable implements TrainablePolicy {
  readonly maxLength: number;
  private hash = '';
  /** PPO's value head on the final hidden states (V = h·w + b), when the run asked for one. */
  private valueHead: { w: tf.Variable; b: tf.Variable } | null = null;
  private readonly policies = new Map<string, HfPolicy>();

  private constructor(
    /** The folder the tokenizer, template and config come from (the base model's, or a checkpoint's). */
    readonly chat: HfChat,
    readonly model: LlamaModel,
    readonly net: LlamaTfjs,
    readonly options: { id?: string; meta?: { [key: string]: Json } } = {},
    /** With LoRA: the folder the adapters adapt, and its content hash. */
    readonly base: { dir: string; hash: string } | null = null,
  ) {
    this.maxLength = model.contextLength;
    const template = chat.template;
    if (!template)
      throw new TrainingError(`${chat.dir} has no chat template: a base model cannot be trained on episodes`);
    this.encoding = new HfChatEncoding(chat.tokenizer, template, chat.eosTokenIds);
  }

  /** The model's chat template as token ids (what demonstrations are rendered with). */
  readonly encoding: HfChatEncoding;

  /** The adapters' rank, alpha and targets; null for full fine-tuning. */
  get lora(): LoraConfig | null {
    return this.net.lora;
  }

  /**
   * A Hugging Face folder (`--init hf:DIR`) or a checkpoint of one (`--init ckpt:DIR`). With `lora`,
   * fresh adapters (A seeded by `seed`) over it; a LoRA checkpoint trains its own adapters (a `lora`
   * given must match them).
   */
  static async load(
    dir: string,
    options: {
      id?: string;
      contextLength?: number;
      lora?: LoraRequest;
      seed?: number;
      valueHead?: boolean;
      /** Threads of the training kernels (the projections' products, the head): default every core. */
      threads?: number;
    } = {},
  ): Promise<HfTrainable> {
    const opened = await openModelDir(dir);
    // On the CPU backends the layers' projections multiply in the linear kernel, on every core; a
    // LoRA run's frozen ones stay only there, in their own dtype (the rest of the model is tensors).
    const cpu = tf.getBackend() === 'wasm' || tf.getBackend() === 'cpu';
    const projectionKernel = cpu ? { threads: options.threads ?? kernelThreads() } : undefined;
    const baseKernel = cpu && Boolean(options.lora || opened.checkpoint?.base);
    checkTfjsHeapFits(tensorParameters(opened.folder.config, baseKernel), tf.getBackend(), dir);
    if (baseKernel) checkLoraKernelFits(opened.folder, dir);
    const loaded = await loadModelDir(dir, { contextLength: options.contextLength });
    const { folder, model, checkpoint } = loaded;
    let net: LlamaTfjs;
    let base: { dir: string; hash: string } | null = null;
    if (loaded.adapters) {
      const c = loaded.adapters.config;
      if (options.lora && (options.lora.rank !== c.rank || options.lora.alpha !== c.alpha))
        throw new TrainingError(
          `${dir} holds rank-${c.rank} adapters (alpha ${c.alpha}); --lora ${options.lora.rank} --lora-alpha ${options.lora.alpha} asks for others`,
        );
      net = new LlamaTfjs(model, { lora: loaded.adapters, projectionKernel });
      base = checkpoint!.base!;
    } else if (options.lora) {
      const config = { ...options.lora, targets: [...LLAMA_LORA_TARGETS] };
      const weights = loraWeights(model.config, config.targets);
      checkLoraConfig(
        config,
        weights.map((w) => w.shape),
        '--lora',
      );
      net = new LlamaTfjs(model, { lora: initLora(config, weights, options.seed ?? 0), projectionKernel });
      base = { dir: resolve(folder.dir), hash: loaded.hash };
    } else {
      checkFullFineTuningFits(parameterCount(model.config), tf.getBackend(), dir);
      net = new LlamaTfjs(model, { projectionKernel });
    }
    const t = new HfTrainable(folder, model, net, { id: options.id, meta: checkpoint?.meta ?? {} }, base);
    t.hash = loaded.hash;
    if (options.valueHead) {
      // A PPO checkpoint carries its value head on; any other model starts with V = 0.
      const saved = existsSync(join(dir, VALUE_HEAD_FILE)) ? await readValueHead(dir, model.config.hiddenSize) : null;
      const d = model.config.hiddenSize;
      t.valueHead = {
        w: tf.variable(tf.tensor2d(saved?.w ?? new Float32Array(d), [d, 1]), true, `value${nextValueHead}/w`),
        b: tf.variable(tf.tensor1d(saved?.b ?? new Float32Array(1)), true, `value${nextValueHead++}/b`),
      };
    }
    return t;
  }

  get hasValueHead(): boolean {
    return this.valueHead !== null;
  }

  /** Frees the tensors (weights, adapters, value head) and the policies' caches. */
  dispose(): void {
    for (const p of this.policies.values()) p.clearCache();
    this.policies.clear();
    this.net.dispose();
    this.valueHead?.w.dispose();
    this.valueHead?.b.dispose();
  }

  get variables(): tf.Variable[] {
    const head = this.valueHead ? [this.valueHead.w, this.valueHead.b] : [];
    return [...this.net.trainableVariables, ...head];
  }

  score(req: ScoreRequest): ScoreOutput {
    return scoreLlama(this.net, req, this.valueHead);
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
    this.hash = await hashModel(this.chat.dir, this.model);
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
      const json: HfCheckpointJson = {
        format: HF_CHECKPOINT_FORMAT,
        version: 1,
        hash: this.hash,
        meta: this.options.meta ?? {},
      };
      if (this.base) {
        await mkdir(tmp);
        await writePeftAdapter(tmp, await this.net.adapterValues(), this.base.dir);
        json.base = this.base;
      } else {
        await exportHf(this.chat, this.model, tmp, 'F32');
      }
      if (this.valueHead) {
        const { w, b } = this.valueHead;
        await writeSafetensors(join(tmp, VALUE_HEAD_FILE), [
          {
            name: 'value.weight',
            dtype: 'F32',
            shape: [w.shape[0]],
            values: async () => (await w.data()) as Float32Array,
          },
          { name: 'value.bias', dtype: 'F32', shape: [1], values: async () => (await b.data()) as Float32Array },
        ]);
      }
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

  /** Replaces what trains with a checkpoint's: the weights of a full one, the adapters of a LoRA one (same base). */
  async load(dir: string): Promise<void> {
    const saved = await readHfCheckpoint(dir);
    if (!saved)
      throw new TrainingError(`${dir} is not a checkpoint of a Hugging Face model (no ${HF_CHECKPOINT_FILE})`);
    if (Boolean(saved.base) !== Boolean(this.base))
      throw new TrainingError(
        `checkpoint ${dir} holds ${saved.base ? 'LoRA adapters' : 'a whole model'}; this run trains ${this.base ? 'adapters' : 'the whole model'}`,
      );
    if (this.base) {
      if (saved.base!.hash !== this.base.hash)
        throw new TrainingError(`checkpoint ${dir} adapts another base model (${saved.base!.dir})`);
      this.assignAdapters(await readPeftAdapter(dir, this.model.config), dir);
    } else {
      const other = await HfTrainable.load(dir);
      try {
        if (JSON.stringify(other.model.config) !== JSON.stringify(this.model.config))
          throw new TrainingError(`checkpoint ${dir} holds another model (its config differs)`);
        for (const [name, v] of this.net.variables) v.assign(other.net.variables.get(name)!);
      } finally {
        other.net.dispose();
      }
    }
    if (this.valueHead) {
      const { w, b } = await readValueHead(dir, this.model.config.hiddenSize);
      tf.tidy(() => {
        this.valueHead!.w.assign(tf.tensor2d(w, this.valueHead!.w.shape as [number, number]));
        this.valueHead!.b.assign(tf.tensor1d(b));
      });
    }
    await this.weightsChanged();
    if (this.hash !== saved.hash)
      throw new TrainingError(
        `checkpoint ${dir}: content hash mismatch (stored ${saved.hash.slice(0, 12)}, computed ${this.hash.slice(0, 12)})`,
      );
  }

  private assignAdapters(saved: LoraAdapters, dir: string): void {
    const own = this.net.lora!;
    const c = saved.config;
    if (c.rank !== own.rank || c.alpha !== own.alpha || c.targets.join() !== own.targets.join())
      throw new TrainingError(
        `checkpoint ${dir} holds rank-${c.rank} adapters (alpha ${c.alpha}) on ${c.targets.join(',')}; this run trains rank ${own.rank} (alpha ${own.alpha}) on ${own.targets.join(',')}`,
      );
    tf.tidy(() => {
      for (const [name, { A, B }] of this.net.adapters) {
        const pair = saved.pairs.get(name)!;
        A.assign(tf.tensor(pair.A, A.shape));
        B.assign(tf.tensor(pair.B, B.shape));
      }
    });
  }

  async freeze() {
    // A LoRA reference shares the frozen base and copies only the adapters.
    const frozen = this.base
      ? new LlamaTfjs(this.model, { trainable: false, lora: await this.net.adapterValues(), weightsOf: this.net })
      : new LlamaTfjs(this.model, {
          trainable: false,
          ...(this.net.linear ? { projectionKernel: { threads: this.net.linear.threads } } : {}),
        });
    return {
      maxLength: this.maxLength,
      score: (r: ScoreRequest) => scoreLlama(frozen, r),
      dispose: () => frozen.dispose(),
    };
  }
}

/**
 * The trainer's forward pass (TrainablePolicy.score) over the Llama family: log-probs (and
 * entropies, and with a value head the values) of the selected tokens, the agent's own with a mask, all of them otherwise; the
 * vocabulary head runs on those positions only, a block of rows at a time (chosenLogprobs), and the
 * results are scattered back to [B, T].
 */
/**
 * Full fine-tuning on the wasm backend: at most this much of optimizer state (16 bytes a parameter).
 * Measured in its 4 GiB heap: a 94M-parameter model (576 wide, 2 layers, Qwen3's 151,936-row tied
 * embedding; 1.5 GB of state) runs out of memory in its first step, between the embedding's
 * gradients and the allocator's fragmentation; a 10M one trains.
 */
const WASM_FULL_FINE_TUNING_BYTES = 2 ** 30;

/**
 * The wasm backend's heap (4 GiB) holds the model in float32 while it trains, LoRA or not: at most
 * this many bytes of weights, beside the activations (Qwen3-0.6B's 2.4 GB trains; measured in
 * docs/benchmarks.md).
 */
const WASM_TRAINING_WEIGHT_BYTES = 3_200_000_000;

/** Parameters the tensor backend holds: all of them, or with the base in the linear kernel all but the layers' projections. */
function tensorParameters(config: LlamaConfig, baseKernel: boolean): number {
  const inKernel = baseKernel
    ? llamaWeights(config)
        .filter((w) => w.shape.length === 2 && w.name.startsWith('model.layers.'))
        .reduce((n, w) => n + w.shape[0]! * w.shape[1]!, 0)
    : 0;
  return parameterCount(config) - inKernel;
}

/**
 * Training refused up front when the wasm heap cannot hold the weights it keeps as tensors, with the
 * numbers: a BF16 model that the decode kernel runs may still be too big to train here.
 */
export function checkTfjsHeapFits(parameters: number, backend: string, dir: string): void {
  const bytes = 4 * parameters;
  if (backend !== 'wasm' || bytes <= WASM_TRAINING_WEIGHT_BYTES) return;
  throw new TrainingError(
    `training ${dir} (${(parameters / 1e6).toFixed(0)}M parameters) holds its weights in float32 in the tensor backend: ` +
      `${(bytes / 1e9).toFixed(1)} GB; the wasm backend's 4 GiB heap holds about ${Math.floor(WASM_TRAINING_WEIGHT_BYTES / 4 / 1e6)}M parameters ` +
      'beside the activations: train LoRA adapters (--lora 8: the frozen base stays in the kernels, out of that heap), ' +
      'use a GPU backend (--backend tensorflow-gpu or webgpu) or a smaller model (generating and serving it works)',
  );
}

/**
 * Refuses, before a weight is read, a LoRA run whose frozen base does not fit this machine's memory:
 * the model holds its weights once, the linear kernel each layer's projection twice more (W and Wᵀ,
 * the backward pass reading rows), all in the checkpoint's dtype, and the head its embedding in
 * float32 twice. (Measured at Qwen2.5-3B in BF16: 19.8 GB counted so, 22.8 GB peak RSS in all.)
 */
export function checkLoraKernelFits(
  folder: Pick<HfChat, 'config'> & { weights: ReadonlyMap<string, { dtype: string }> },
  dir: string,
): void {
  const bytesOf = (name: string, shape: readonly number[]) =>
    heldBytes(shape, ['BF16', 'F16'].includes(folder.weights.get(name)?.dtype ?? ''));
  let model = 0;
  let projections = 0;
  for (const { name, shape } of llamaWeights(folder.config)) {
    model += bytesOf(name, shape);
    if (shape.length === 2 && name.startsWith('model.layers.')) projections += bytesOf(name, shape);
  }
  // The head's float32 embedding, twice: a tensor, and the head kernel's own copy.
  const head = 2 * 4 * folder.config.vocabSize * folder.config.hiddenSize;
  const bytes = model + 2 * projections + head;
  const max = maxWeightBytes();
  if (bytes <= max) return;
  const gb = (n: number) => (n / 1e9).toFixed(1);
  throw new TrainingError(
    `training LoRA adapters over ${dir} holds its weights (${gb(model)} GB), the layers' projections twice more in the linear kernel (W and Wᵀ, ${gb(2 * projections)} GB) and the head in float32 (${gb(head)} GB): ` +
      `${gb(bytes)} GB; this machine holds at most ${gb(max)} GB of weights (${memoryBudgetText()}): generating and serving it works (one copy)`,
  );
}

/**
 * Full fine-tuning keeps four float32 copies of every weight (the weights, their gradients, AdamW's
 * two moments), before any activation. Past what the wasm backend's heap holds, the first step would
 * die as "memory access out of bounds", far from its cause: refused here, with what would fit.
 */
export function checkFullFineTuningFits(parameters: number, backend: string, dir: string): void {
  const bytes = 16 * parameters;
  if (backend !== 'wasm' || bytes <= WASM_FULL_FINE_TUNING_BYTES) return;
  throw new TrainingError(
    `training every weight of ${dir} (${(parameters / 1e6).toFixed(0)}M parameters) needs ${(bytes / 1e9).toFixed(1)} GB ` +
      "for the weights, their gradients and AdamW's moments; the wasm backend's 4 GiB heap holds that for about " +
      `${Math.floor(WASM_FULL_FINE_TUNING_BYTES / 16 / 1e6)}M parameters: train LoRA adapters (--lora 8), or use a GPU backend (--backend tensorflow-gpu or webgpu)`,
  );
}

export function scoreLlama(
  net: LlamaTfjs,
  req: ScoreRequest,
  valueHead: { w: tf.Tensor; b: tf.Tensor } | null = null,
): ScoreOutput {
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
      const values = req.values && valueHead;
      if (select.length === 0)
        return {
          logprobs: place(null),
          ...(req.entropy ? { entropy: place(null) } : {}),
          ...(values ? { values: place(null) } : {}),
        };
      const hidden = net.hiddenStates(tokens);
      const rows = tf.gather(
        hidden,
        tf.tensor1d(
          Int32Array.from(select, (i) => i - 1),
          'int32',
        ),
      ) as tf.Tensor2D;
      const targets = tf.gather(tokens.reshape([B * T]), tf.tensor1d(Int32Array.from(select), 'int32')) as tf.Tensor1D;
      const out = chosenLogprobs(rows, net.head as unknown as tf.Tensor2D, targets, req.temperature ?? 1, {
        entropy: req.entropy === true,
        threads: net.linear?.threads,
      });
      return {
        logprobs: place(out.logprobs),
        ...(req.entropy ? { entropy: place(out.entropy) } : {}),
        // V of the state before each token: the hidden state that predicts it.
        ...(values ? { values: place(rows.matMul(valueHead.w).add(valueHead.b).reshape([-1]) as tf.Tensor1D) } : {}),
      };
    });
  } finally {
    tokens.dispose();
  }
}
