import * as tf from '@tensorflow/tfjs';
import { createRng } from '../../core/rng.ts';
import { COPY_EPS } from './row-attention.ts';
import { ModelError, parseModelConfig, type ModelConfig, type ModelConfigInput } from './model-config.ts';

/**
 * A small GPT: decoder-only, pre-LN, causal multi-head self-attention, GELU MLP, learned positions,
 * token embedding tied to the output head, plus a scalar value head (for PPO). Its config is in
 * model-config.ts; the incremental forward that generation runs, on a KV cache, in decode.ts.
 *
 * Written for tfjs-wasm speed: every matmul is 2-D or batched rank-3/4 (the wasm kernels are
 * patched in backend.ts), attention tensors stay at rank ≤ 4, and the embedding is a gather whose
 * gradient kernel backend.ts registers for wasm.
 */

interface LayerParams {
  ln1g: tf.Variable;
  ln1b: tf.Variable;
  wq: tf.Variable;
  wk: tf.Variable;
  wv: tf.Variable;
  bq: tf.Variable;
  bk: tf.Variable;
  bv: tf.Variable;
  wo: tf.Variable;
  bo: tf.Variable;
  ln2g: tf.Variable;
  ln2b: tf.Variable;
  w1: tf.Variable;
  b1: tf.Variable;
  w2: tf.Variable;
  b2: tf.Variable;
}

export interface ForwardResult {
  /** [B, T, V] */
  logits: tf.Tensor3D;
  /** [B, T] */
  values: tf.Tensor2D;
}

const NEG = -1e9;
let nextModelId = 0;

/**
 * The model. `forward(tokens)` is differentiable with respect to `trainableVariables`, so it can be
 * used inside `tf.variableGrads` / `optimizer.minimize` (see adamw.ts).
 */
export class GPTModel {
  readonly config: ModelConfig;
  readonly tokEmb: tf.Variable;
  /** The learned position table (positions: 'learned' only). */
  readonly posEmb: tf.Variable | null;
  /** Rotary tables [contextLength, d]: cos, sin, and the pair-rotation matrix [d, d] (positions: 'rope'). */
  private readonly rope: { cos: tf.Tensor2D; sin: tf.Tensor2D; rot: tf.Tensor2D } | null;
  readonly layers: LayerParams[];
  readonly lnfG: tf.Variable;
  /** Per-channel gate of the previous token's embedding (tokenShift only). */
  readonly shiftGate: tf.Variable | null;
  readonly lnfB: tf.Variable;
  readonly valueW: tf.Variable;
  readonly valueB: tf.Variable;
  /** Copy head: query/key projections [d, d] and the generate-vs-copy gate (copyHead only). */
  readonly copy: { wq: tf.Variable; wk: tf.Variable; gateW: tf.Variable; gateB: tf.Variable } | null;
  private causalCache = new Map<number, tf.Tensor2D>();
  private readonly named: Array<[string, tf.Variable]> = [];

  /** Builds a model with weights initialized from `seed` (GPT-2 style: N(0, 0.02), residual projections scaled by 1/√(2L)). */
  constructor(config: ModelConfigInput, seed = 0, weights?: Map<string, tf.Tensor>) {
    this.config = parseModelConfig(config);
    const { vocabSize: V, dModel: d, nLayers: L, contextLength: C, dMlp: M } = this.config;
    const rng = createRng(seed);
    // tfjs variable names are global: prefix them so several models can coexist.
    const uid = `gpt${nextModelId++}/`;
    const take = (name: string, shape: number[], init: 'normal' | 'zeros' | 'ones', std = 0.02): tf.Variable => {
      const v = create(name, shape, init, std);
      this.named.push([name, v]);
      return v;
    };
    const create = (name: string, shape: number[], init: 'normal' | 'zeros' | 'ones', std: number): tf.Variable => {
      const given = weights?.get(name);
      if (weights) {
        if (!given) throw new ModelError(`checkpoint has no weight "${name}"`);
        if (given.shape.join(',') !== shape.join(',')) {
          throw new ModelError(`weight "${name}" has shape [${given.shape}], the config needs [${shape}]`);
        }
        return tf.variable(given, true, uid + name);
      }
      const size = shape.reduce((a, b) => a * b, 1);
      const data = new Float32Array(size);
      if (init === 'ones') data.fill(1);
      else if (init === 'normal') {
        for (let i = 0; i < size; i += 2) {
          // Box-Muller from the seeded stream, so the same seed gives the same initial weights.
          const u = Math.max(rng.next(), 1e-12);
          const v = rng.next();
          const r = Math.sqrt(-2 * Math.log(u)) * std;
          data[i] = r * Math.cos(2 * Math.PI * v);
          if (i + 1 < size) data[i + 1] = r * Math.sin(2 * Math.PI * v);
        }
      }
      return tf.variable(tf.tensor(data, shape), true, uid + name);
    };
    const residStd = 0.02 / Math.sqrt(2 * L);
    this.tokEmb = take('tok_emb', [V, d], 'normal');
    this.posEmb = this.config.positions === 'learned' ? take('pos_emb', [C, d], 'normal', 0.01) : null;
    this.rope = this.config.positions === 'rope' ? ropeTables(C, d, this.config.nHeads) : null;
    this.layers = [];
    for (let l = 0; l < L; l++) {
      const p = `h${l}.`;
      this.layers.push({
        ln1g: take(p + 'ln1.g', [d], 'ones'),
        ln1b: take(p + 'ln1.b', [d], 'zeros'),
        wq: take(p + 'attn.wq', [d, d], 'normal'),
        wk: take(p + 'attn.wk', [d, d], 'normal'),
        wv: take(p + 'attn.wv', [d, d], 'normal'),
        bq: take(p + 'attn.bq', [d], 'zeros'),
        bk: take(p + 'attn.bk', [d], 'zeros'),
        bv: take(p + 'attn.bv', [d], 'zeros'),
        wo: take(p + 'attn.wo', [d, d], 'normal', residStd),
        bo: take(p + 'attn.bo', [d], 'zeros'),
        ln2g: take(p + 'ln2.g', [d], 'ones'),
        ln2b: take(p + 'ln2.b', [d], 'zeros'),
        w1: take(p + 'mlp.w1', [d, M], 'normal'),
        b1: take(p + 'mlp.b1', [M], 'zeros'),
        w2: take(p + 'mlp.w2', [M, d], 'normal', residStd),
        b2: take(p + 'mlp.b2', [d], 'zeros'),
      });
    }
    this.shiftGate = this.config.tokenShift ? take('shift.gate', [d], 'zeros') : null;
    this.lnfG = take('lnf.g', [d], 'ones');
    this.lnfB = take('lnf.b', [d], 'zeros');
    this.valueW = take('value.w', [d, 1], 'zeros');
    this.valueB = take('value.b', [1], 'zeros');
    // Last, so that models without a copy head draw the same initial weights as before it existed.
    this.copy = this.config.copyHead
      ? {
          wq: take('copy.wq', [d, d], 'normal'),
          wk: take('copy.wk', [d, d], 'normal'),
          gateW: take('copy.gate.w', [d, 1], 'zeros'),
          gateB: take('copy.gate.b', [1], 'zeros'),
        }
      : null;
  }

  /** Weights by name, in a fixed order (the checkpoint order). */
  namedWeights(): Array<[string, tf.Variable]> {
    return this.named.slice();
  }

  get trainableVariables(): tf.Variable[] {
    return this.namedWeights().map(([, v]) => v);
  }

  parameterCount(): number {
    return this.trainableVariables.reduce((n, v) => n + v.size, 0);
  }

  /**
   * tokens [B, T] int32 → logits [B, T, V] and values [B, T], positions 0..T-1, causal attention
   * (training and scoring; right padding does not affect earlier positions).
   */
  forward(tokens: tf.Tensor2D): ForwardResult {
    const { vocabSize: V } = this.config;
    const [B, T] = tokens.shape;
    const [logits, values] = tf.tidy(() => {
      const h = this.hiddenStates(tokens);
      const out = this.copy
        ? this.predict(
            h,
            tokens,
            Int32Array.from({ length: B * T }, (_, i) => i),
          )
        : this.logitsOf(h);
      return [out.reshape([B, T, V]) as tf.Tensor3D, this.valuesOf(h).reshape([B, T]) as tf.Tensor2D] as const;
    });
    return { logits, values };
  }

  /** The final (layer-normed) hidden states, [B*T, d]; logitsOf / valuesOf turn any rows of it into outputs. */
  hiddenStates(tokens: tf.Tensor2D): tf.Tensor2D {
    const { dModel: d, nHeads: H, contextLength: C } = this.config;
    const [B, T] = tokens.shape;
    if (T > C) throw new ModelError(`sequence of ${T} tokens is longer than the context (${C})`);
    checkAttentionSize(B, H, T, T);
    const dh = d / H;
    return tf.tidy(() => {
      // A gather: its gradient (UnsortedSegmentSum) is registered for wasm in backend.ts.
      let x = tf.gather(this.tokEmb, tokens.reshape([B * T])) as tf.Tensor2D; // [B*T, d]
      if (this.shiftGate) {
        const prev = x
          .reshape([B, T, d])
          .slice([0, 0, 0], [B, T - 1, d])
          .pad([
            [0, 0],
            [1, 0],
            [0, 0],
          ])
          .reshape([B * T, d]);
        x = x.add(prev.mul(this.shiftGate));
      }
      const posIds = tf.range(0, T, 1, 'int32').tile([B]) as tf.Tensor1D;
      if (this.posEmb) x = x.add(tf.gather(this.posEmb, posIds));
      const rotary = this.rotaryAt(posIds);
      const mask = this.causal(T).reshape([1, 1, T, T]) as tf.Tensor4D;
      const scale = 1 / Math.sqrt(dh);
      this.layers.forEach((p) => {
        const h = layerNorm(x, p.ln1g, p.ln1b);
        const heads = (x2: tf.Tensor2D) => x2.reshape([B, T, H, dh]).transpose([0, 2, 1, 3]) as tf.Tensor4D;
        const k = heads(rotary(tf.matMul(h, p.wk).add(p.bk)));
        const v = heads(tf.matMul(h, p.wv).add(p.bv));
        const q = heads(rotary(tf.matMul(h, p.wq).add(p.bq)).mul(scale));
        const scores = tf.matMul(q, k, false, true).add(mask); // [B, H, T, Tk]
        const att = tf.softmax(scores);
        const ctx = tf
          .matMul(att, v)
          .transpose([0, 2, 1, 3])
          .reshape([B * T, d]);
        x = x.add(tf.matMul(ctx, p.wo).add(p.bo));
        const h2 = layerNorm(x, p.ln2g, p.ln2b);
        x = x.add(tf.matMul(gelu(tf.matMul(h2, p.w1).add(p.b1)), p.w2).add(p.b2));
      });
      return layerNorm(x, this.lnfG, this.lnfB);
    });
  }

  /** Vocabulary logits [N, V] of hidden states [N, d] (the output head is the token embedding, tied). */
  logitsOf(hidden: tf.Tensor2D): tf.Tensor2D {
    return tf.matMul(hidden, this.tokEmb, false, true) as tf.Tensor2D;
  }

  /**
   * The next-token logits [N, V] at flat positions `at` (b·T + t) of hidden states [B*T, d] from
   * `hiddenStates(tokens)`. Without a copy head these are the vocabulary logits. With one they are
   * the log-probabilities of the mixture gate·softmax(vocabulary) + (1 − gate)·copy, where copy
   * puts the copy attention's weight on position s (s ≤ t) onto the token id found at s.
   * Differentiable; softmax of the result is the distribution either way.
   */
  predict(hidden: tf.Tensor2D, tokens: tf.Tensor2D, at: Int32Array): tf.Tensor2D {
    const c = this.copy;
    if (!c) return this.logitsOf(tf.gather(hidden, tf.tensor1d(at, 'int32')) as tf.Tensor2D);
    const { vocabSize: V, dModel: d, contextLength: C } = this.config;
    const [B, T] = tokens.shape;
    const N = at.length;
    // Each selected position's query goes to slot (row, k) of a [B, S, d] block, so one batched
    // matmul scores it against its own row's keys only.
    const perRow = new Int32Array(B);
    const slotOf = new Int32Array(N);
    at.forEach((i, j) => {
      const b = Math.floor(i / T);
      slotOf[j] = perRow[b]!;
      perRow[b] = perRow[b]! + 1;
    });
    const S = Math.max(1, ...perRow);
    const padIdx = new Int32Array(B * S).fill(N);
    const unpad = new Int32Array(N);
    const mask = new Float32Array(N * T);
    const rowOf = new Int32Array(N);
    const segBase = new Int32Array(N);
    at.forEach((i, j) => {
      const b = Math.floor(i / T);
      const t = i % T;
      padIdx[b * S + slotOf[j]!] = j;
      unpad[j] = b * S + slotOf[j]!;
      for (let s = t + 1; s < T; s++) mask[j * T + s] = NEG;
      rowOf[j] = b;
      segBase[j] = j * V;
    });
    return tf.tidy(() => {
      const rowPos = tf.tensor1d(
        Int32Array.from(at, (i) => Math.min(i % T, C - 1)),
        'int32',
      );
      const allPos = tf.range(0, T, 1, 'int32').tile([B]) as tf.Tensor1D;
      const hs = tf.gather(hidden, tf.tensor1d(at, 'int32')) as tf.Tensor2D; // [N, d]
      const q = this.rotaryAt(rowPos)(tf.matMul(hs, c.wq)).mul(1 / Math.sqrt(d)) as tf.Tensor2D;
      const k = this.rotaryAt(allPos)(tf.matMul(hidden, c.wk)).reshape([B, T, d]) as tf.Tensor3D;
      const qPad = tf
        .gather(tf.concat([q, tf.zeros([1, d])], 0), tf.tensor1d(padIdx, 'int32'))
        .reshape([B, S, d]) as tf.Tensor3D;
      const scores = tf.gather(
        tf.matMul(qPad, k, false, true).reshape([B * S, T]),
        tf.tensor1d(unpad, 'int32'),
      ) as tf.Tensor2D;
      const att = tf.softmax(scores.add(tf.tensor2d(mask, [N, T]))); // [N, T]
      // Segment of (j, s): j·V + the token id at s of j's row. Built on the device from the tokens
      // tensor, so no synchronous read (which the webgpu backend cannot do) is needed here.
      const seg = tf
        .gather(tokens, tf.tensor1d(rowOf, 'int32'))
        .add(tf.tensor2d(segBase, [N, 1], 'int32'))
        .reshape([N * T]) as tf.Tensor1D;
      const copied = tf.unsortedSegmentSum(att.reshape([N * T]), seg, N * V).reshape([N, V]);
      const gate = tf.sigmoid(tf.matMul(hs, c.gateW).add(c.gateB)); // [N, 1]
      const mix = tf
        .softmax(this.logitsOf(hs))
        .mul(gate)
        .add(copied.mul(tf.scalar(1).sub(gate)));
      return tf.log(mix.add(COPY_EPS)) as tf.Tensor2D;
    });
  }

  /** Values [N] of hidden states [N, d]. */
  valuesOf(hidden: tf.Tensor2D): tf.Tensor1D {
    return tf.tidy(() => tf.matMul(hidden, this.valueW).add(this.valueB).reshape([hidden.shape[0]]) as tf.Tensor1D);
  }

  /**
   * Rotary position encoding for rows [N, d] at positions posIds [N]: x·cos + (x·R)·sin, where R
   * rotates each (i, i + dh/2) pair within a head. One small 2-D matmul and three elementwise ops,
   * all differentiable with respect to x. Identity when the model uses learned positions.
   */
  rotaryAt(posIds: tf.Tensor1D): (x: tf.Tensor2D) => tf.Tensor2D {
    const rows = this.ropeRows(posIds);
    return (x) => this.rotate(x, rows);
  }

  /** The rotary cos/sin rows [N, d] at positions posIds (the caller disposes them); null with learned positions. */
  ropeRows(posIds: tf.Tensor1D): { cos: tf.Tensor2D; sin: tf.Tensor2D } | null {
    if (!this.rope) return null;
    return {
      cos: tf.gather(this.rope.cos, posIds) as tf.Tensor2D,
      sin: tf.gather(this.rope.sin, posIds) as tf.Tensor2D,
    };
  }

  /** x·cos + (x·R)·sin with rows from ropeRows (x itself when there are none). */
  rotate(x: tf.Tensor2D, rows: { cos: tf.Tensor2D; sin: tf.Tensor2D } | null): tf.Tensor2D {
    if (!rows || !this.rope) return x;
    return x.mul(rows.cos).add(tf.matMul(x, this.rope.rot).mul(rows.sin)) as tf.Tensor2D;
  }

  /** Additive causal mask [T, T]. */
  private causal(T: number): tf.Tensor2D {
    let m = this.causalCache.get(T);
    if (!m) {
      const data = new Float32Array(T * T);
      for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) data[i * T + j] = NEG;
      m = tf.keep(tf.tensor2d(data, [T, T]));
      if (this.causalCache.size > 64) {
        for (const t of this.causalCache.values()) t.dispose();
        this.causalCache.clear();
      }
      this.causalCache.set(T, m);
    }
    return m;
  }

  dispose(): void {
    for (const v of this.trainableVariables) v.dispose();
    if (this.rope) tf.dispose([this.rope.cos, this.rope.sin, this.rope.rot]);
    for (const t of this.causalCache.values()) t.dispose();
    this.causalCache.clear();
  }
}

/** cos/sin tables [C, d] (each head's dh/2 frequencies, repeated for both halves) and the rotation R [d, d]. */
function ropeTables(C: number, d: number, H: number): { cos: tf.Tensor2D; sin: tf.Tensor2D; rot: tf.Tensor2D } {
  const dh = d / H;
  const half = dh / 2;
  if (!Number.isInteger(half)) throw new ModelError(`rotary positions need an even head size, got ${dh}`);
  const cos = new Float32Array(C * d);
  const sin = new Float32Array(C * d);
  for (let t = 0; t < C; t++) {
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < half; i++) {
        const angle = t / 10000 ** ((2 * i) / dh);
        for (const j of [i, i + half]) {
          cos[t * d + h * dh + j] = Math.cos(angle);
          sin[t * d + h * dh + j] = Math.sin(angle);
        }
      }
    }
  }
  // (x·R)[i] = -x[i + half] for the first half, x[i - half] for the second: rotate_half.
  const rot = new Float32Array(d * d);
  for (let h = 0; h < H; h++) {
    for (let i = 0; i < half; i++) {
      const a = h * dh + i;
      const b = a + half;
      rot[b * d + a] = -1;
      rot[a * d + b] = 1;
    }
  }
  return {
    cos: tf.keep(tf.tensor2d(cos, [C, d])),
    sin: tf.keep(tf.tensor2d(sin, [C, d])),
    rot: tf.keep(tf.tensor2d(rot, [d, d])),
  };
}

export function layerNorm(x: tf.Tensor2D, g: tf.Tensor, b: tf.Tensor): tf.Tensor2D {
  const { mean, variance } = tf.moments(x, -1, true);
  return x
    .sub(mean)
    .mul(tf.rsqrt(variance.add(1e-5)))
    .mul(g)
    .add(b) as tf.Tensor2D;
}

/** GELU, sigmoid form x·σ(1.702x): 3 kernels instead of the tanh form's 8, within 0.02 of the exact GELU. */
export function gelu(x: tf.Tensor): tf.Tensor {
  return x.mul(tf.sigmoid(x.mul(1.702)));
}

/**
 * The largest attention-score tensor a forward may make on the wasm backend. Its heap is at most a
 * few GiB and a training step keeps several such tensors per layer; past this size the step would
 * fail far from its cause ("memory access out of bounds"), so it is refused here, by name.
 */
export const WASM_ATTENTION_LIMIT_BYTES = 512 * 2 ** 20;

/** The webgpu backend's device's largest storage-buffer binding (it requests the adapter's own). */
function webgpuBindingLimit(): number | undefined {
  const backend = tf.backend() as unknown as { device?: { limits?: { maxStorageBufferBindingSize?: number } } };
  return backend.device?.limits?.maxStorageBufferBindingSize;
}

function checkAttentionSize(rows: number, heads: number, queries: number, keys: number): void {
  const bytes = rows * heads * queries * keys * 4;
  const backend = tf.getBackend();
  // On webgpu one tensor is one storage buffer, at most the device's binding size (a larger one
  // would make its kernels invalid, which ends the process far from the cause).
  const limit =
    backend === 'wasm'
      ? WASM_ATTENTION_LIMIT_BYTES
      : backend === 'webgpu'
        ? (webgpuBindingLimit() ?? Infinity)
        : Infinity;
  if (bytes > limit) {
    throw new ModelError(
      `a forward of ${rows} sequences × ${queries} tokens needs ${(bytes / 2 ** 20).toFixed(0)} MiB per attention tensor, ` +
        `more than the ${backend} backend's ${(limit / 2 ** 20).toFixed(0)} MiB limit: use fewer sequences per batch (e.g. a smaller microbatch)`,
    );
  }
}
