import * as tf from '@tensorflow/tfjs';
import { LinearKernel, type LinearMatrix } from '../kernel/linear-kernel.ts';
import { loraScale, type LoraAdapters, type LoraConfig } from '../lora.ts';
import { llamaWeights, type LlamaConfig } from './config.ts';
import { Bfloat16Weight, Float16Weight, type LlamaModel } from './model.ts';
import { ropeTables } from './rope.ts';

const NEG = -1e9;
let nextId = 0;

/** Activations past this (activationBytes) are recomputed in the backward pass rather than kept. */
export const CHECKPOINT_BYTES = 256 << 20;

/** A recomputed layer runs a chunk of sequences whose activations are about this size at a time. */
export const CHUNK_BYTES = 64 << 20;

/**
 * tf.grads run inside a gradient function (a backward pass). tfjs keeps one tape: a tf.grads begun
 * there would replace the tape being backpropagated and drop it when done, so that tape is set aside
 * and put back.
 */
function gradsInBackward(f: (...xs: tf.Tensor[]) => tf.Tensor, xs: tf.Tensor[], dy: tf.Tensor): tf.Tensor[] {
  const state = tf.engine().state;
  const outer = state.activeTape;
  try {
    return tf.grads(f)(xs, dy);
  } finally {
    state.activeTape = outer;
  }
}

/** What every layer of one forward shares: the batch's shape, the rotary rows, the causal mask. */
interface LayerInput {
  B: number;
  T: number;
  cos: tf.Tensor3D;
  sin: tf.Tensor3D;
  mask: tf.Tensor4D;
}

function variable(values: Float32Array, shape: number[], trainable: boolean, name: string): tf.Variable {
  return tf.tidy(() => tf.variable(tf.tensor(values, shape), trainable, name));
}

/**
 * The Llama family's forward pass in TensorFlow.js: what training differentiates (the decode kernel
 * generates; the two agree within float32 rounding, and the trainer's log-probs are the sampler's
 * within 1e-5). The same equations as the kernel, in the kernel's order where it matters: RMSNorm as
 * x·(1/√(mean x² + ε))·g, q scaled after the rotary, SwiGLU as silu(gate)·up.
 *
 * Each weight is a tf.Variable holding the model's float32 values; `writeBack` copies them into the
 * model after an update, and the kernel notices. With LoRA adapters the weights are the frozen base
 * and only the adapters train: a projection computes x·Wᵀ + scale·(x·Aᵀ)·Bᵀ, and `writeBack` gives
 * the model the adapters' values (it computes, and the kernel samples from, the base with them).
 *
 * With `projectionKernel` (the CPU backends) the layers' projections multiply in a LinearKernel on
 * its threads (a custom op: x·Wᵀ; dy·W and, for a trained weight, dyᵀ·x for its gradients), the same
 * bits for any number of threads. With LoRA the frozen projections are kept only there, in the
 * checkpoint's dtype, outside the backend's heap; a trained projection stays a tensor (what the
 * optimizer updates) and is copied into the kernel when its values change.
 */
export class LlamaTfjs {
  readonly config: LlamaConfig;
  /** The weights by checkpoint name (the base, with LoRA). */
  readonly variables: Map<string, tf.Variable>;
  /** Per adapted weight, its A and B (empty without LoRA). */
  readonly adapters = new Map<string, { A: tf.Variable; B: tf.Variable }>();
  readonly lora: LoraConfig | null;
  private readonly checkpoint: { above: number; chunkBytes: number };
  private readonly ownsWeights: boolean;
  private rope: { cos: tf.Tensor2D; sin: tf.Tensor2D; positions: number } | null = null;
  private readonly causal = new Map<number, tf.Tensor4D>();
  private readonly kvHeads: tf.Tensor1D;
  /** The projections, with `projectionKernel` (shared with a `weightsOf` instance's). */
  readonly linear: LinearKernel | null;
  private readonly ownsLinear: boolean;
  /** A trained projection's data identity when it was last copied into the kernel. */
  private readonly mirrored = new Map<string, object>();

  constructor(
    readonly model: LlamaModel,
    options: {
      /** Whether what trains here (the weights, or the adapters with LoRA) is trainable; default true. */
      trainable?: boolean;
      /** Adapters to train over the frozen weights. */
      lora?: LoraAdapters;
      /** Read the weights of this instance (a frozen base) rather than copying the model's. */
      weightsOf?: LlamaTfjs;
      /**
       * Multiply the projections in a LinearKernel on `threads` threads (default: every core); with
       * LoRA the frozen projections are kept there rather than as tensors.
       */
      projectionKernel?: { threads?: number };
      /**
       * Activation checkpointing: recompute layers in the backward pass when a forward's activations
       * pass `above` bytes, `chunkBytes` of them at a time (defaults CHECKPOINT_BYTES, CHUNK_BYTES).
       */
      checkpoint?: { above: number; chunkBytes: number };
    } = {},
  ) {
    this.config = model.config;
    this.checkpoint = options.checkpoint ?? { above: CHECKPOINT_BYTES, chunkBytes: CHUNK_BYTES };
    const trainable = options.trainable ?? true;
    const uid = `llama${nextId++}/`;
    this.ownsWeights = !options.weightsOf;
    this.variables = options.weightsOf?.variables ?? new Map();
    this.ownsLinear = !options.weightsOf && Boolean(options.projectionKernel);
    this.linear = options.weightsOf
      ? options.weightsOf.linear
      : this.ownsLinear
        ? new LinearKernel(projections(model, Boolean(options.lora)), options.projectionKernel)
        : null;
    if (this.ownsWeights)
      for (const { name, shape } of llamaWeights(this.config))
        if (!(options.lora && this.linear?.has(name)))
          this.variables.set(
            name,
            variable(
              options.lora ? model.baseWeight(name) : model.weight(name),
              shape,
              trainable && !options.lora,
              uid + name,
            ),
          );
    this.lora = options.lora?.config ?? null;
    for (const [name, { A, B }] of options.lora?.pairs ?? []) {
      const [out, inDim] = this.matrixShape(name);
      const r = this.lora!.rank;
      this.adapters.set(name, {
        A: variable(A, [r, inDim], trainable, `${uid}${name}.lora_A`),
        B: variable(B, [out, r], trainable, `${uid}${name}.lora_B`),
      });
    }
    const { numHeads: H, numKvHeads: Hkv } = this.config;
    this.kvHeads = tf.keep(
      tf.tensor1d(
        Int32Array.from({ length: H }, (_, h) => Math.floor(h / (H / Hkv))),
        'int32',
      ),
    );
  }

  /** The variables the optimizer updates: the weights', or with LoRA the adapters' (A then B per weight). */
  get trainableVariables(): tf.Variable[] {
    const all = this.lora ? [...this.adapters.values()].flatMap(({ A, B }) => [A, B]) : [...this.variables.values()];
    return all.filter((v) => v.trainable);
  }

  /** The adapters' current values (for a checkpoint, or a frozen copy). */
  async adapterValues(): Promise<LoraAdapters> {
    const pairs = new Map<string, { A: Float32Array; B: Float32Array }>();
    for (const [name, { A, B }] of this.adapters)
      pairs.set(name, { A: (await A.data()) as Float32Array, B: (await B.data()) as Float32Array });
    return { config: this.lora!, pairs };
  }

  private w(name: string): tf.Variable {
    return this.variables.get(name)!;
  }

  /** A weight matrix's [out, in], wherever it is kept. */
  private matrixShape(name: string): [number, number] {
    return this.linear?.has(name) ? this.linear.shape(name) : (this.variables.get(name)!.shape as [number, number]);
  }

  /**
   * input · Wᵀ for a projection the LinearKernel holds; its gradient to the input is dy · W there.
   * A trained weight `w` (the variable, or its value as a checkpointed layer passes it) is copied
   * into the kernel when its values changed, and gets dyᵀ · input for its gradient.
   */
  private kernelProduct(weight: string, input: tf.Tensor2D, w: tf.Tensor | null): tf.Tensor2D {
    const linear = this.linear!;
    const [S, K] = input.shape;
    const [N] = linear.shape(weight);
    if (!w) {
      const frozen = tf.customGrad((x) => ({
        value: tf.tensor2d(linear.apply(weight, (x as tf.Tensor).dataSync() as Float32Array, S), [S, N]),
        gradFunc: (dy: tf.Tensor) => tf.tensor2d(linear.apply(weight, dy.dataSync() as Float32Array, S, true), [S, K]),
      }));
      return frozen(input) as tf.Tensor2D;
    }
    // An assigned variable takes new data (a new dataId): compare identities, not values.
    const id = w.dataId;
    if (this.mirrored.get(weight) !== id) {
      linear.set(weight, w.dataSync() as Float32Array);
      this.mirrored.set(weight, id);
    }
    const trained = tf.customGrad((x, _w, save) => {
      const xv = (x as tf.Tensor).dataSync() as Float32Array;
      (save as tf.GradSaveFunc)([x as tf.Tensor]);
      return {
        value: tf.tensor2d(linear.apply(weight, xv, S), [S, N]),
        gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
          const g = dy.dataSync() as Float32Array;
          return [
            tf.tensor2d(linear.apply(weight, g, S, true), [S, K]),
            tf.tensor2d(linear.outer(g, saved[0]!.dataSync() as Float32Array, S, N, K), [N, K]),
          ];
        },
      };
    });
    return trained(input, w) as tf.Tensor2D;
  }

  /**
   * The final (normed) hidden states [B·T, d] of tokens [B, T], positions 0..T-1, causal. When the
   * activations a backward pass would keep pass `checkpoint.above` bytes, the last layers keep theirs
   * as far as `above` allows and each layer before them keeps only its input and is recomputed in the
   * backward pass (activation checkpointing): a third more compute for those layers, and memory for
   * one layer's activations instead of theirs.
   */
  hiddenStates(tokens: tf.Tensor2D): tf.Tensor2D {
    const [B, T] = tokens.shape;
    return tf.tidy(() => {
      const at: LayerInput = { B, T, ...this.ropeRows(B, T), mask: this.causalMask(T) };
      let x = this.embed(tokens.reshape([B * T]) as tf.Tensor1D);
      const L = this.config.numLayers;
      const kept = Math.min(L, Math.floor(this.checkpoint.above / (this.activationBytes(B, T) / L)));
      for (let l = 0; l < L; l++)
        x = l < L - kept ? this.checkpointedLayer(l, x, at) : this.layer(l, x, at, (name) => this.param(name));
      return this.rmsNorm(x, this.w('model.norm.weight'));
    });
  }

  /**
   * The embedding rows of token ids. A frozen embedding (LoRA's) is looked up off the trainer's tape:
   * on it, the lookup would keep a copy of the whole table for a gradient nobody asks for.
   */
  private embed(ids: tf.Tensor1D): tf.Tensor2D {
    const table = this.w('model.embed_tokens.weight');
    if (table.trainable) return tf.gather(table, ids) as tf.Tensor2D;
    // A custom op's forward runs untaped; its one input (the ids) is on no path from a variable, so
    // its gradient function is never called.
    const lookup = tf.customGrad((i) => ({
      value: tf.gather(table, i as tf.Tensor1D),
      gradFunc: () => tf.zerosLike(i as tf.Tensor1D),
    }));
    return lookup(ids) as tf.Tensor2D;
  }

  /** About what a backward pass keeps of a forward over [B, T] (float32): per layer its projections' outputs and its attention's scores. */
  activationBytes(B: number, T: number): number {
    const { hiddenSize: d, intermediateSize: M, numHeads: H, numLayers: L } = this.config;
    return 4 * L * B * T * (10 * d + 4 * M + 3 * H * T);
  }

  /** A weight, or an adapter's half (`<weight>.lora_A` / `.lora_B`), by name. */
  private param(name: string): tf.Tensor {
    const lora = /\.lora_([AB])$/.exec(name);
    if (!lora) return this.w(name);
    const pair = this.adapters.get(name.slice(0, -'.lora_A'.length))!;
    return lora[1] === 'A' ? pair.A : pair.B;
  }

  /** Layer `l` of the residual stream x [B·T, d], its parameters read through `get`. */
  private layer(l: number, x: tf.Tensor2D, at: LayerInput, get: (name: string) => tf.Tensor): tf.Tensor2D {
    const c = this.config;
    const { numHeads: H, numKvHeads: Hkv, headDim: dh } = c;
    const { B, T, cos, sin, mask } = at;
    const p = `model.layers.${l}.`;
    const proj = (name: string, input: tf.Tensor2D, bias: boolean) => {
      const weight = `${p}${name}.weight`;
      let y = this.linear?.has(weight)
        ? this.kernelProduct(weight, input, this.lora ? null : get(weight))
        : (tf.matMul(input, get(weight), false, true) as tf.Tensor2D);
      if (this.adapters.has(weight)) {
        const low = tf.matMul(input, get(`${weight}.lora_A`), false, true);
        y = y.add(tf.matMul(low, get(`${weight}.lora_B`), false, true).mul(loraScale(this.lora!)));
      }
      return bias ? (y.add(get(`${p}${name}.bias`)) as tf.Tensor2D) : y;
    };
    const heads = (y: tf.Tensor2D, n: number, norm: string | null) => {
      let t = y.reshape([B * T * n, dh]) as tf.Tensor2D;
      if (norm) t = this.rmsNorm(t, get(`${p}self_attn.${norm}.weight`));
      return t.reshape([B * T, n, dh]) as tf.Tensor3D;
    };
    const h = this.rmsNorm(x, get(`${p}input_layernorm.weight`));
    const q = this.rotate(heads(proj('self_attn.q_proj', h, c.qkvBias), H, c.qkNorm ? 'q_norm' : null), cos, sin)
      .mul(1 / Math.sqrt(dh))
      .reshape([B, T, H, dh])
      .transpose([0, 2, 1, 3]) as tf.Tensor4D;
    const k = this.rotate(heads(proj('self_attn.k_proj', h, c.qkvBias), Hkv, c.qkNorm ? 'k_norm' : null), cos, sin)
      .reshape([B, T, Hkv, dh])
      .transpose([0, 2, 1, 3]);
    const v = proj('self_attn.v_proj', h, c.qkvBias).reshape([B, T, Hkv, dh]).transpose([0, 2, 1, 3]);
    // Grouped-query attention: each query head reads its group's key/value head.
    const kq = (Hkv === H ? k : tf.gather(k, this.kvHeads, 1)) as tf.Tensor4D;
    const vq = (Hkv === H ? v : tf.gather(v, this.kvHeads, 1)) as tf.Tensor4D;
    const att = tf.softmax(tf.matMul(q, kq, false, true).add(mask));
    const ctx = tf
      .matMul(att, vq)
      .transpose([0, 2, 1, 3])
      .reshape([B * T, H * dh]) as tf.Tensor2D;
    const mid = x.add(proj('self_attn.o_proj', ctx, c.oBias)) as tf.Tensor2D;
    const h2 = this.rmsNorm(mid, get(`${p}post_attention_layernorm.weight`));
    const gate = proj('mlp.gate_proj', h2, c.mlpBias);
    const up = proj('mlp.up_proj', h2, c.mlpBias);
    return mid.add(proj('mlp.down_proj', gate.mul(tf.sigmoid(gate)).mul(up) as tf.Tensor2D, c.mlpBias)) as tf.Tensor2D;
  }

  /**
   * Layer `l` that keeps only its input for the backward pass, where it runs again under its own
   * tape: its gradients with respect to the input and to its trainable parameters (passed in as
   * inputs, so that the trainer's tape sees them) are those of the plain layer.
   */
  private checkpointedLayer(l: number, x: tf.Tensor2D, at: LayerInput): tf.Tensor2D {
    const prefix = `model.layers.${l}.`;
    const names = [
      ...[...this.variables].filter(([n, v]) => n.startsWith(prefix) && v.trainable).map(([n]) => n),
      ...[...this.adapters]
        .filter(([n, { A }]) => n.startsWith(prefix) && A.trainable)
        .flatMap(([n]) => [`${n}.lora_A`, `${n}.lora_B`]),
    ];
    const params = names.map((n) => this.param(n));
    const run = (input: tf.Tensor2D, values: tf.Tensor[], shared: LayerInput) => {
      const given = new Map(names.map((n, i) => [n, values[i]!]));
      return this.layer(l, input, shared, (n) => given.get(n) ?? this.param(n));
    };
    // A layer's sequences are independent of each other: run it a few sequences at a time, so that
    // one chunk's activations, not the whole batch's, are alive at once.
    const { B, T } = at;
    const perChunk = Math.max(
      1,
      Math.floor((B * this.checkpoint.chunkBytes * this.config.numLayers) / this.activationBytes(B, T)),
    );
    const chunks = Array.from({ length: Math.ceil(B / perChunk) }, (_, i) => {
      const from = i * perChunk;
      return [from, Math.min(perChunk, B - from)] as const;
    });
    const part = (shared: LayerInput, from: number, n: number): LayerInput => ({
      B: n,
      T,
      cos: shared.cos.slice([from * T, 0, 0], [n * T, -1, -1]),
      sin: shared.sin.slice([from * T, 0, 0], [n * T, -1, -1]),
      mask: shared.mask,
    });
    const rows = (t: tf.Tensor, from: number, n: number) => t.slice([from * T, 0], [n * T, -1]) as tf.Tensor2D;
    const op = tf.customGrad((...args: unknown[]) => {
      const save = args.pop() as tf.GradSaveFunc;
      const [input, ...values] = args as [tf.Tensor2D, ...tf.Tensor[]];
      save([input]);
      const outs = chunks.map(([from, n]) => tf.tidy(() => run(rows(input, from, n), values, part(at, from, n))));
      const value = tf.concat(outs, 0);
      tf.dispose(outs);
      return {
        value,
        gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
          const input0 = saved[0] as tf.Tensor2D;
          // The rotary rows again (the forward's scope has let its own go); the mask is cached.
          const again = { B, T, ...this.ropeRows(B, T), mask: this.causalMask(T) };
          const dx: tf.Tensor[] = [];
          const sums: tf.Tensor[] = [];
          for (const [from, n] of chunks) {
            const [dxChunk, ...dpChunk] = tf.tidy(() => {
              const shared = part(again, from, n);
              const f = (i: tf.Tensor, ...v: tf.Tensor[]) => run(i as tf.Tensor2D, v, shared);
              return gradsInBackward(f, [rows(input0, from, n), ...params], rows(dy, from, n));
            });
            dx.push(dxChunk!);
            dpChunk.forEach((g, p) => {
              const prev = sums[p];
              sums[p] = prev ? prev.add(g) : g;
              if (prev) tf.dispose([prev, g]);
            });
          }
          const dInput = tf.concat(dx, 0);
          tf.dispose([...dx, again.cos, again.sin]);
          return [dInput, ...sums];
        },
      };
    });
    return op(x, ...params) as tf.Tensor2D;
  }

  /** The vocabulary head's weights [V, d]: the embedding when tied. */
  get head(): tf.Variable {
    return this.w(this.config.tieEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  }

  /** Vocabulary logits [N, V] of hidden states [N, d]. */
  logitsOf(hidden: tf.Tensor2D): tf.Tensor2D {
    return tf.matMul(hidden, this.head, false, true) as tf.Tensor2D;
  }

  /** tokens [B, T] → logits [B, T, V]. */
  forward(tokens: tf.Tensor2D): tf.Tensor3D {
    const [B, T] = tokens.shape;
    return tf.tidy(
      () => this.logitsOf(this.hiddenStates(tokens)).reshape([B, T, this.config.vocabSize]) as tf.Tensor3D,
    );
  }

  private rmsNorm(x: tf.Tensor2D, g: tf.Tensor): tf.Tensor2D {
    const inv = tf.rsqrt(x.square().mean(-1, true).add(this.config.rmsNormEps));
    return x.mul(inv).mul(g) as tf.Tensor2D;
  }

  /** x·cos + rotate_half(x)·sin on heads [N, n, dh], rows [N, dh] of the positions (Transformers' apply_rotary_pos_emb). */
  private rotate(x: tf.Tensor3D, cos: tf.Tensor3D, sin: tf.Tensor3D): tf.Tensor3D {
    const [N, n, dh] = x.shape;
    const half = dh / 2;
    const x1 = x.slice([0, 0, 0], [N, n, half]);
    const x2 = x.slice([0, 0, half], [N, n, half]);
    const rotated = tf.concat([x2.neg(), x1], 2);
    return x.mul(cos).add(rotated.mul(sin)) as tf.Tensor3D;
  }

  /** cos and sin rows [B·T, 1, dh] of positions 0..T-1 in each row (the tables grow to the longest T seen). */
  private ropeRows(B: number, T: number): { cos: tf.Tensor3D; sin: tf.Tensor3D } {
    if (!this.rope || this.rope.positions < T) {
      if (this.rope) tf.dispose([this.rope.cos, this.rope.sin]);
      const positions = Math.max(T, this.rope ? 2 * this.rope.positions : 64);
      const { cos, sin } = ropeTables(this.config, positions);
      const dh = this.config.headDim;
      const full = (half: Float32Array) => {
        const out = new Float32Array(positions * dh);
        for (let p = 0; p < positions; p++) {
          out.set(half.subarray(p * (dh / 2), (p + 1) * (dh / 2)), p * dh);
          out.set(half.subarray(p * (dh / 2), (p + 1) * (dh / 2)), p * dh + dh / 2);
        }
        return tf.keep(tf.tensor2d(out, [positions, dh]));
      };
      this.rope = { cos: full(cos), sin: full(sin), positions };
    }
    const ids = tf.range(0, T, 1, 'int32').tile([B]) as tf.Tensor1D;
    const dh = this.config.headDim;
    return {
      cos: tf.gather(this.rope.cos, ids).reshape([B * T, 1, dh]) as tf.Tensor3D,
      sin: tf.gather(this.rope.sin, ids).reshape([B * T, 1, dh]) as tf.Tensor3D,
    };
  }

  private causalMask(T: number): tf.Tensor4D {
    let m = this.causal.get(T);
    if (!m) {
      const data = new Float32Array(T * T);
      for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) data[i * T + j] = NEG;
      m = tf.keep(tf.tensor4d(data, [1, 1, T, T]));
      if (this.causal.size > 16) {
        for (const t of this.causal.values()) t.dispose();
        this.causal.clear();
      }
      this.causal.set(T, m);
    }
    return m;
  }

  /**
   * Copies what trained into the model's weights and moves its revision on: the weights' values, or
   * with LoRA each adapted weight merged (its base + scale·B·A).
   */
  async writeBack(): Promise<void> {
    if (this.lora) {
      // The model computes base + scale·B·A itself (the decode kernel reads the adapters beside its base).
      this.model.setAdapters(await this.adapterValues());
    } else {
      for (const [name, v] of this.variables) {
        if (!v.trainable) continue;
        const data = (await v.data()) as Float32Array;
        this.model.setWeight(name, data);
      }
    }
    this.model.revision++;
  }

  dispose(): void {
    if (this.ownsWeights) for (const v of this.variables.values()) v.dispose();
    if (this.ownsLinear) this.linear!.dispose();
    for (const { A, B } of this.adapters.values()) tf.dispose([A, B]);
    if (this.rope) tf.dispose([this.rope.cos, this.rope.sin]);
    for (const t of this.causal.values()) t.dispose();
    this.kvHeads.dispose();
  }
}

/**
 * Every layer's projection matrices as the LinearKernel keeps them: a frozen base as the model holds
 * it (16 bits as their bits), trained weights as float32.
 */
function projections(model: LlamaModel, frozen: boolean): LinearMatrix[] {
  return llamaWeights(model.config)
    .filter((s) => s.shape.length === 2 && s.name.startsWith('model.layers.'))
    .map(({ name, shape: [rows, cols] }) => {
      const m = { name, rows: rows!, cols: cols! };
      if (!frozen) return { ...m, format: 'F32', values: model.weight(name) };
      const w = model.stored(name);
      if (w instanceof Bfloat16Weight) return { ...m, format: 'BF16', values: w.bits };
      if (w instanceof Float16Weight) return { ...m, format: 'F16', values: w.bits };
      return { ...m, format: 'F32', values: w };
    });
}
