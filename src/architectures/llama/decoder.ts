import { KernelHost } from '../kernel/kernel-host.ts';
import { LLAMA_KERNEL_WASM } from './kernel/llama-kernel-wasm.ts';
import type { LlamaModel } from './model.ts';
import { ropeTables } from './rope.ts';

// The model table's slots (llama-step.as.ts M_* and L_*).
const M_LAYERS = 16;
const LAYER_SLOTS = 12;
const FLAG_QKV_BIAS = 1;
const FLAG_O_BIAS = 2;
const FLAG_MLP_BIAS = 4;
const FLAG_QK_NORM = 8;

/**
 * The Llama family's decode kernel (kernel/llama-step.as.ts) on the shared kernel host. The weights
 * go into the kernel's memory as the checkpoint stores them ([out, in], float32), q/k/v and gate/up
 * side by side so that each pair is one matmul; the embedding serves as the head when tied. They are
 * copied in when the model's revision changed since the last copy.
 */
export class LlamaDecoder extends KernelHost {
  private loaded = -1;

  private constructor(readonly model: LlamaModel) {
    const c = model.config;
    super(LLAMA_KERNEL_WASM, {
      layers: c.numLayers,
      width: c.numKvHeads * c.headDim,
      copyWidth: 0,
      vocabSize: c.vocabSize,
      contextLength: model.contextLength,
    });
  }

  private static readonly byModel = new WeakMap<LlamaModel, LlamaDecoder>();

  /** The model's decoder (one per model; its memory holds that model's weights). */
  static for(model: LlamaModel): LlamaDecoder {
    let d = LlamaDecoder.byModel.get(model);
    if (!d) {
      d = new LlamaDecoder(model);
      LlamaDecoder.byModel.set(model, d);
    }
    return d;
  }

  /** Copies the weights in if they changed since the last copy (a no-op otherwise). */
  async prepare(): Promise<void> {
    if (this.loaded === this.model.revision) return;
    const m = this.model;
    const c = m.config;
    const { hiddenSize: d, numHeads: H, numKvHeads: Hkv, headDim: dh, intermediateSize: M, vocabSize: V } = c;
    const rope = ropeTables(c, m.contextLength);
    const plain = (x: Float32Array) => (f: Float32Array) => f.set(x);
    const stacked = (parts: Float32Array[]) => (f: Float32Array) => {
      let at = 0;
      for (const p of parts) {
        f.set(p, at);
        at += p.length;
      }
    };
    this.writeModel(M_LAYERS + c.numLayers * LAYER_SLOTS, (table, put) => {
      table.set([d, H, Hkv, dh, c.numLayers, M, V], 0);
      table[7] =
        (c.qkvBias ? FLAG_QKV_BIAS : 0) |
        (c.oBias ? FLAG_O_BIAS : 0) |
        (c.mlpBias ? FLAG_MLP_BIAS : 0) |
        (c.qkNorm ? FLAG_QK_NORM : 0);
      table[8] = new Int32Array(Float32Array.of(c.rmsNormEps).buffer)[0]!;
      put(9, V * d, plain(m.weight('model.embed_tokens.weight')));
      if (c.tieEmbeddings) table[10] = table[9]!;
      else put(10, V * d, plain(m.weight('lm_head.weight')));
      put(11, d, plain(m.weight('model.norm.weight')));
      put(12, rope.cos.length, plain(rope.cos));
      put(13, rope.sin.length, plain(rope.sin));
      const qkvRows = (H + 2 * Hkv) * dh;
      for (let l = 0; l < c.numLayers; l++) {
        const p = `model.layers.${l}.`;
        const w = (name: string) => m.weight(p + name);
        const s = M_LAYERS + l * LAYER_SLOTS;
        put(s, d, plain(w('input_layernorm.weight')));
        put(s + 1, qkvRows * d, stacked(['q', 'k', 'v'].map((x) => w(`self_attn.${x}_proj.weight`))));
        if (c.qkvBias) put(s + 2, qkvRows, stacked(['q', 'k', 'v'].map((x) => w(`self_attn.${x}_proj.bias`))));
        put(s + 3, d * H * dh, plain(w('self_attn.o_proj.weight')));
        if (c.oBias) put(s + 4, d, plain(w('self_attn.o_proj.bias')));
        if (c.qkNorm) {
          put(s + 5, dh, plain(w('self_attn.q_norm.weight')));
          put(s + 6, dh, plain(w('self_attn.k_norm.weight')));
        }
        put(s + 7, d, plain(w('post_attention_layernorm.weight')));
        put(s + 8, 2 * M * d, stacked([w('mlp.gate_proj.weight'), w('mlp.up_proj.weight')]));
        if (c.mlpBias) put(s + 9, 2 * M, stacked([w('mlp.gate_proj.bias'), w('mlp.up_proj.bias')]));
        put(s + 10, d * M, plain(w('mlp.down_proj.weight')));
        if (c.mlpBias) put(s + 11, d, plain(w('mlp.down_proj.bias')));
      }
    });
    this.loaded = m.revision;
  }
}
