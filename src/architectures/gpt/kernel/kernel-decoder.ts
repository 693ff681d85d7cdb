import * as tf from '@tensorflow/tfjs';
import { ceil8, KernelHost } from '../../kernel/kernel-host.ts';
import { ModelError } from '../model-config.ts';
import type { GPTModel } from '../model.ts';
import { DECODE_KERNEL_WASM } from './decode-kernel-wasm.ts';

/**
 * The GPT's decode kernel (decode-step.as.ts) on its host (src/architectures/kernel/kernel-host.ts,
 * which holds the rows, caches and steps every kernel shares). The weights are repacked for the
 * kernel (matrices as panels of 8 columns) and written when they change: a tfjs Variable's `assign`
 * gives it new data, checked by identity at each `prepare`, so the copy happens once per policy
 * version.
 */

// The model table's slots (decode-step.as.ts M_*).
const M_LAYERS = 20;
const LAYER_SLOTS = 12;

/** A [K][N] matrix (row-major) as panels of 8 columns, [ceil8(N)/8][K][8], zero-padded. */
export function packPanels(w: Float32Array, K: number, N: number, out: Float32Array): void {
  const panels = ceil8(N) / 8;
  out.fill(0, 0, panels * K * 8);
  for (let p = 0; p < panels; p++) {
    for (let k = 0; k < K; k++) {
      const o = (p * K + k) * 8;
      for (let j = 0; j < 8 && p * 8 + j < N; j++) out[o + j] = w[k * N + p * 8 + j]!;
    }
  }
}

export class KernelDecoder extends KernelHost {
  private stamp: readonly object[] = [];
  /** How many times the weights were copied in (once per policy version). */
  weightLoads = 0;

  private constructor(readonly model: GPTModel) {
    const { nLayers, dModel, vocabSize, contextLength, copyHead } = model.config;
    super(DECODE_KERNEL_WASM, {
      layers: nLayers,
      width: dModel,
      copyWidth: copyHead ? dModel : 0,
      vocabSize,
      contextLength,
    });
  }

  private static readonly byModel = new WeakMap<GPTModel, KernelDecoder>();

  /** The model's decoder (one per model; its memory holds that model's weights). */
  static for(model: GPTModel): KernelDecoder {
    let d = KernelDecoder.byModel.get(model);
    if (!d) {
      d = new KernelDecoder(model);
      KernelDecoder.byModel.set(model, d);
    }
    return d;
  }

  /** Copies the weights in if they changed since the last copy (a no-op otherwise). */
  async prepare(): Promise<void> {
    const vars = this.model.namedWeights().map(([, v]) => v);
    const ids = vars.map((v) => v.dataId as object);
    if (ids.length === this.stamp.length && ids.every((id, i) => id === this.stamp[i])) return;
    const data = (await Promise.all(vars.map((v) => v.data()))) as Float32Array[];
    const byName = new Map(this.model.namedWeights().map(([name], i) => [name, data[i]!]));
    let rope: { cos: Float32Array; sin: Float32Array } | null = null;
    if (this.model.config.positions === 'rope') {
      const C = this.model.config.contextLength;
      const [cos, sin] = tf.tidy(() => {
        const r = this.model.ropeRows(tf.range(0, C, 1, 'int32') as tf.Tensor1D)!;
        return [r.cos, r.sin];
      });
      try {
        rope = { cos: (await cos!.data()) as Float32Array, sin: (await sin!.data()) as Float32Array };
      } finally {
        tf.dispose([cos!, sin!]);
      }
    }
    this.writeWeights(byName, rope);
    this.stamp = ids;
    this.weightLoads++;
  }

  private writeWeights(w: Map<string, Float32Array>, rope: { cos: Float32Array; sin: Float32Array } | null): void {
    const { vocabSize: V, dModel: d, nLayers: L, nHeads: H, dMlp: M, contextLength: C } = this.model.config;
    const copy = this.model.config.copyHead;
    const get = (name: string) => {
      const x = w.get(name);
      if (!x) throw new ModelError(`the model has no weight "${name}"`);
      return x;
    };
    this.writeModel(M_LAYERS + L * LAYER_SLOTS, (table, put) => {
      const plain =
        (x: Float32Array, pad = x.length) =>
        (f: Float32Array) => {
          f.fill(0, 0, pad);
          f.set(x);
        };
      const packed = (x: Float32Array, K: number, N: number) => (f: Float32Array) => packPanels(x, K, N, f);
      table[0] = d;
      table[1] = H;
      table[2] = L;
      table[3] = M;
      table[4] = V;
      table[5] =
        (this.model.config.positions === 'rope' ? 1 : 0) |
        (this.model.config.tokenShift ? 2 : 0) |
        (this.model.config.positions === 'learned' ? 4 : 0) |
        (copy ? 8 : 0);
      const tok = get('tok_emb');
      put(6, V * d, plain(tok));
      const tokT = new Float32Array(d * V);
      for (let v = 0; v < V; v++) for (let c = 0; c < d; c++) tokT[c * V + v] = tok[v * d + c]!;
      put(7, ceil8(V) * d, packed(tokT, d, V));
      if (this.model.config.positions === 'learned') put(8, C * d, plain(get('pos_emb')));
      if (rope) {
        put(9, C * d, plain(rope.cos));
        put(10, C * d, plain(rope.sin));
      }
      if (this.model.config.tokenShift) put(11, d, plain(get('shift.gate')));
      put(12, d, plain(get('lnf.g')));
      put(13, d, plain(get('lnf.b')));
      if (copy) {
        put(14, ceil8(d) * d, packed(get('copy.wq'), d, d));
        put(15, ceil8(d) * d, packed(get('copy.wk'), d, d));
        put(16, d, plain(get('copy.gate.w')));
        put(17, 1, plain(get('copy.gate.b')));
      }
      for (let l = 0; l < L; l++) {
        const p = `h${l}.`;
        const s = M_LAYERS + l * LAYER_SLOTS;
        const q8 = ceil8(3 * d);
        const wqkv = new Float32Array(d * 3 * d);
        const [wq, wk, wv] = [get(p + 'attn.wq'), get(p + 'attn.wk'), get(p + 'attn.wv')];
        for (let k = 0; k < d; k++) {
          wqkv.set(wq.subarray(k * d, (k + 1) * d), k * 3 * d);
          wqkv.set(wk.subarray(k * d, (k + 1) * d), k * 3 * d + d);
          wqkv.set(wv.subarray(k * d, (k + 1) * d), k * 3 * d + 2 * d);
        }
        const bqkv = new Float32Array(q8);
        bqkv.set(get(p + 'attn.bq'), 0);
        bqkv.set(get(p + 'attn.bk'), d);
        bqkv.set(get(p + 'attn.bv'), 2 * d);
        put(s, d, plain(get(p + 'ln1.g')));
        put(s + 1, d, plain(get(p + 'ln1.b')));
        put(s + 2, q8 * d, packed(wqkv, d, 3 * d));
        put(s + 3, q8, plain(bqkv));
        put(s + 4, ceil8(d) * d, packed(get(p + 'attn.wo'), d, d));
        put(s + 5, ceil8(d), plain(get(p + 'attn.bo'), ceil8(d)));
        put(s + 6, d, plain(get(p + 'ln2.g')));
        put(s + 7, d, plain(get(p + 'ln2.b')));
        put(s + 8, ceil8(M) * d, packed(get(p + 'mlp.w1'), d, M));
        put(s + 9, ceil8(M), plain(get(p + 'mlp.b1'), ceil8(M)));
        put(s + 10, ceil8(d) * M, packed(get(p + 'mlp.w2'), M, d));
        put(s + 11, ceil8(d), plain(get(p + 'mlp.b2'), ceil8(d)));
      }
    });
  }
}
