import * as tf from '@tensorflow/tfjs';
import { llamaWeights, type LlamaConfig } from './config.ts';
import type { LlamaModel } from './model.ts';
import { ropeTables } from './rope.ts';

const NEG = -1e9;
let nextId = 0;

/**
 * The Llama family's forward pass in TensorFlow.js: what training differentiates (the decode kernel
 * generates; the two agree within float32 rounding, and the trainer's log-probs are the sampler's
 * within 1e-5). The same equations as the kernel, in the kernel's order where it matters: RMSNorm as
 * x·(1/√(mean x² + ε))·g, q scaled after the rotary, SwiGLU as silu(gate)·up.
 *
 * Each weight is a tf.Variable (trainable or not, by name), holding the model's float32 values;
 * `writeBack` copies them into the model after an update, and the kernel notices.
 */
export class LlamaTfjs {
  readonly config: LlamaConfig;
  readonly variables = new Map<string, tf.Variable>();
  private rope: { cos: tf.Tensor2D; sin: tf.Tensor2D; positions: number } | null = null;
  private readonly causal = new Map<number, tf.Tensor4D>();
  private readonly kvHeads: tf.Tensor1D;

  constructor(
    readonly model: LlamaModel,
    trainable: (name: string) => boolean = () => true,
  ) {
    this.config = model.config;
    const uid = `llama${nextId++}/`;
    for (const { name, shape } of llamaWeights(this.config)) {
      this.variables.set(name, tf.variable(tf.tensor(model.weight(name), shape), trainable(name), uid + name));
    }
    const { numHeads: H, numKvHeads: Hkv } = this.config;
    this.kvHeads = tf.keep(
      tf.tensor1d(
        Int32Array.from({ length: H }, (_, h) => Math.floor(h / (H / Hkv))),
        'int32',
      ),
    );
  }

  /** The variables the optimizer updates. */
  get trainableVariables(): tf.Variable[] {
    return [...this.variables.values()].filter((v) => v.trainable);
  }

  private w(name: string): tf.Variable {
    return this.variables.get(name)!;
  }

  /** The final (normed) hidden states [B·T, d] of tokens [B, T], positions 0..T-1, causal. */
  hiddenStates(tokens: tf.Tensor2D): tf.Tensor2D {
    const c = this.config;
    const { numHeads: H, numKvHeads: Hkv, headDim: dh } = c;
    const [B, T] = tokens.shape;
    return tf.tidy(() => {
      const { cos, sin } = this.ropeRows(B, T);
      const mask = this.causalMask(T);
      let x = tf.gather(this.w('model.embed_tokens.weight'), tokens.reshape([B * T])) as tf.Tensor2D;
      for (let l = 0; l < c.numLayers; l++) {
        const p = `model.layers.${l}.`;
        const h = this.rmsNorm(x, this.w(`${p}input_layernorm.weight`));
        const proj = (name: string, input: tf.Tensor2D, bias: boolean) => {
          const y = tf.matMul(input, this.w(`${p}${name}.weight`), false, true) as tf.Tensor2D;
          return bias ? (y.add(this.w(`${p}${name}.bias`)) as tf.Tensor2D) : y;
        };
        const heads = (y: tf.Tensor2D, n: number, norm: string | null) => {
          let t = y.reshape([B * T * n, dh]) as tf.Tensor2D;
          if (norm) t = this.rmsNorm(t, this.w(`${p}self_attn.${norm}.weight`));
          return t.reshape([B * T, n, dh]) as tf.Tensor3D;
        };
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
        x = x.add(proj('self_attn.o_proj', ctx, c.oBias)) as tf.Tensor2D;
        const h2 = this.rmsNorm(x, this.w(`${p}post_attention_layernorm.weight`));
        const gate = proj('mlp.gate_proj', h2, c.mlpBias);
        const up = proj('mlp.up_proj', h2, c.mlpBias);
        x = x.add(proj('mlp.down_proj', gate.mul(tf.sigmoid(gate)).mul(up) as tf.Tensor2D, c.mlpBias)) as tf.Tensor2D;
      }
      return this.rmsNorm(x, this.w('model.norm.weight'));
    });
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

  /** Copies the variables' values into the model's weights (after an update) and moves its revision on. */
  async writeBack(): Promise<void> {
    for (const [name, v] of this.variables) {
      if (!v.trainable) continue;
      const data = (await v.data()) as Float32Array;
      this.model.weight(name).set(data);
    }
    this.model.revision++;
  }

  dispose(): void {
    for (const v of this.variables.values()) v.dispose();
    if (this.rope) tf.dispose([this.rope.cos, this.rope.sin]);
    for (const t of this.causal.values()) t.dispose();
    this.kvHeads.dispose();
  }
}
