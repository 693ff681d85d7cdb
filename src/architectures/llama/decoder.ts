import { Worker } from 'node:worker_threads';
import { KERNEL_BASE, KernelHost, kernelThreads } from '../kernel/kernel-host.ts';
import { LLAMA_KERNEL_WASM } from './kernel/llama-kernel-wasm.ts';
import type { Bfloat16Weight, Float16Weight, LlamaModel } from './model.ts';
import { ropeTables } from './rope.ts';
import { llamaWeights } from './config.ts';
import { loraScale } from '../lora.ts';

// The model table's slots (llama-step.as.ts M_* and L_*).
const M_LAYERS = 16;
const LAYER_SLOTS = 20;
const M_RANK = 14;
const FLAG_QKV_BIAS = 1;
const FLAG_O_BIAS = 2;
const FLAG_MLP_BIAS = 4;
const FLAG_QK_NORM = 8;
const FLAG_BF16 = 16;
const FLAG_F16 = 32;

// The control block, in page 0 (which the kernel leaves to the host): i32 slots 0–9 the step's
// arguments, then the generation (moved on to start a step) and stop; the kernel's barrier after it.
const CTL = KERNEL_BASE - 256;
const SYNC = CTL + 64;
const C_GEN = 10;
const C_STOP = 11;
const MAX_PAGES = 65536;

/**
 * A worker's part: instantiate the kernel on the shared memory, say so, and run its share of every
 * step. It parks in JS: under Node 20's optimizing compiler a `memory.atomic.wait32` parking loop
 * inside the kernel never woke on the host's notify.
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, ctl, thread, generation } = workerData;
const kernel = new WebAssembly.Instance(module, { env: { memory } }).exports;
const c = new Int32Array(memory.buffer, ctl, 16);
parentPort.postMessage('ready');
for (let seen = generation; ; ) {
  Atomics.wait(c, ${C_GEN}, seen);
  seen = Atomics.load(c, ${C_GEN});
  if (Atomics.load(c, ${C_STOP})) break;
  kernel.step(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], thread, c[8], c[9]);
}
`;

/** Stops a decoder's workers once the decoder itself is gone. */
const stopWorkers = new FinalizationRegistry<{ memory: WebAssembly.Memory; workers: Worker[] }>(
  ({ memory, workers }) => {
    const ctl = new Int32Array(memory.buffer, CTL, 16);
    Atomics.store(ctl, C_STOP, 1);
    Atomics.add(ctl, C_GEN, 1);
    Atomics.notify(ctl, C_GEN);
    for (const w of workers) w.unref();
  },
);

/**
 * The Llama family's decode kernel (kernel/llama-step.as.ts) on the shared kernel host. The weights
 * go into the kernel's memory as the checkpoint stores them ([out, in]; the matrices float32, or
 * bfloat16 when the model holds every one in bfloat16), q/k/v and gate/up
 * side by side so that each pair is one matmul; the embedding serves as the head when tied. They are
 * copied in when the model's revision changed since the last copy.
 *
 * The memory is shared, and a step runs on `threads` threads: this one and workers parked in the
 * kernel's `serve` loop, each doing its share of every phase (the logits are the same bits for any
 * number of them). The workers start with the first `prepare` and stop when the decoder is gone.
 */
export class LlamaDecoder extends KernelHost {
  private loaded = -1;
  private readonly shared: WebAssembly.Memory;
  private workers: Promise<void> | null = null;
  readonly threads: number;

  constructor(
    readonly model: LlamaModel,
    options: { threads?: number } = {},
  ) {
    const c = model.config;
    const memory = new WebAssembly.Memory({ initial: 2, maximum: MAX_PAGES, shared: true });
    super(
      LLAMA_KERNEL_WASM,
      {
        layers: c.numLayers,
        width: c.numKvHeads * c.headDim,
        copyWidth: 0,
        vocabSize: c.vocabSize,
        contextLength: model.contextLength,
      },
      memory,
    );
    this.shared = memory;
    this.threads = options.threads ?? kernelThreads();
  }

  /** Starts the workers (threads − 1 of them) and waits until each is parked in the kernel. */
  private startWorkers(): Promise<void> {
    this.workers ??= (async () => {
      const workers: Worker[] = [];
      // The generation now: a step started before a worker parks still counts as new to it.
      const generation = Atomics.load(new Int32Array(this.shared.buffer, CTL, 16), C_GEN);
      await Promise.all(
        Array.from({ length: this.threads - 1 }, (_, i) => {
          const worker = new Worker(WORKER, {
            eval: true,
            workerData: { module: this.module, memory: this.shared, ctl: CTL, thread: i + 1, generation },
          });
          workers.push(worker);
          return new Promise<void>((resolve, reject) => {
            worker.once('message', () => resolve());
            worker.once('error', reject);
          });
        }),
      );
      for (const w of workers) w.unref();
      stopWorkers.register(this, { memory: this.shared, workers });
    })();
    return this.workers;
  }

  override stepScratch(S: number, R: number): number {
    return this.exports.scratchBytes(this.modelPtr, S, R, this.shape.contextLength, this.threads);
  }

  override runStep(rows: number, R: number, tokens: number, S: number, out: number, scratch: number): void {
    const C = this.shape.contextLength;
    const T = this.threads;
    if (T > 1) {
      const ctl = new Int32Array(this.shared.buffer, CTL, 16);
      ctl.set([this.modelPtr, rows, R, tokens, S, out, scratch, C, T, SYNC]);
      Atomics.add(ctl, C_GEN, 1);
      Atomics.notify(ctl, C_GEN);
    }
    // This thread is thread 0; the step ends at a barrier every thread reaches.
    this.exports.step(this.modelPtr, rows, R, tokens, S, out, scratch, C, 0, T, SYNC);
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

  /** Copies the weights in if they changed since the last copy (a no-op otherwise); starts the workers. */
  async prepare(): Promise<void> {
    if (this.threads > 1) await this.startWorkers();
    if (this.loaded === this.model.revision) return;
    const m = this.model;
    const c = m.config;
    const { hiddenSize: d, numHeads: H, numKvHeads: Hkv, headDim: dh, intermediateSize: M, vocabSize: V } = c;
    const rope = ropeTables(c, m.contextLength);
    const plain = (x: Float32Array) => (f: Float32Array) => f.set(x);
    const stacked =
      <A extends Float32Array | Uint16Array>(parts: A[]) =>
      (f: A) => {
        let at = 0;
        for (const p of parts) {
          f.set(p, at);
          at += p.length;
        }
      };
    // The matrices in bfloat16 or half when the model holds every one so, else all in float32.
    const half = m.matrixFormat;
    // LoRA adapters are read beside the base (the base as held: 16 bits stay 16 bits), B times alpha/r.
    const lora = m.adapters;
    const r = lora?.config.rank ?? 0;
    const scale = lora ? loraScale(lora.config) : 0;
    const shapeOf = new Map(llamaWeights(c).map((w) => [w.name, w.shape]));
    this.writeModel(M_LAYERS + c.numLayers * LAYER_SLOTS, (table, put, put16) => {
      const matrix = (slot: number, size: number, names: string[]) =>
        half
          ? put16(slot, size, stacked(names.map((n) => (m.stored(n) as Bfloat16Weight | Float16Weight).bits)))
          : put(slot, size, stacked(names.map((n) => m.baseWeight(n))));
      table.set([d, H, Hkv, dh, c.numLayers, M, V], 0);
      table[7] =
        (c.qkvBias ? FLAG_QKV_BIAS : 0) |
        (c.oBias ? FLAG_O_BIAS : 0) |
        (c.mlpBias ? FLAG_MLP_BIAS : 0) |
        (c.qkNorm ? FLAG_QK_NORM : 0) |
        (half === 'BF16' ? FLAG_BF16 : half === 'F16' ? FLAG_F16 : 0);
      table[8] = new Int32Array(Float32Array.of(c.rmsNormEps).buffer)[0]!;
      table[M_RANK] = r;
      matrix(9, V * d, ['model.embed_tokens.weight']);
      if (c.tieEmbeddings) table[10] = table[9]!;
      else matrix(10, V * d, ['lm_head.weight']);
      put(11, d, plain(m.weight('model.norm.weight')));
      put(12, rope.cos.length, plain(rope.cos));
      put(13, rope.sin.length, plain(rope.sin));
      const qkvRows = (H + 2 * Hkv) * dh;
      for (let l = 0; l < c.numLayers; l++) {
        const p = `model.layers.${l}.`;
        const w = (name: string) => m.weight(p + name);
        const s = M_LAYERS + l * LAYER_SLOTS;
        put(s, d, plain(w('input_layernorm.weight')));
        matrix(
          s + 1,
          qkvRows * d,
          ['q', 'k', 'v'].map((x) => `${p}self_attn.${x}_proj.weight`),
        );
        if (c.qkvBias) put(s + 2, qkvRows, stacked(['q', 'k', 'v'].map((x) => w(`self_attn.${x}_proj.bias`))));
        matrix(s + 3, d * H * dh, [`${p}self_attn.o_proj.weight`]);
        if (c.oBias) put(s + 4, d, plain(w('self_attn.o_proj.bias')));
        if (c.qkNorm) {
          put(s + 5, dh, plain(w('self_attn.q_norm.weight')));
          put(s + 6, dh, plain(w('self_attn.k_norm.weight')));
        }
        put(s + 7, d, plain(w('post_attention_layernorm.weight')));
        matrix(s + 8, 2 * M * d, [`${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`]);
        if (c.mlpBias) put(s + 9, 2 * M, stacked([w('mlp.gate_proj.bias'), w('mlp.up_proj.bias')]));
        matrix(s + 10, d * M, [`${p}mlp.down_proj.weight`]);
        if (c.mlpBias) put(s + 11, d, plain(w('mlp.down_proj.bias')));
        if (lora) {
          const group = (slot: number, members: string[]) => {
            const shapes = members.map((n) => shapeOf.get(`${p}${n}.weight`)!);
            const inDim = shapes[0]![1]!;
            const outs = shapes.map((sh) => sh[0]!);
            const total = outs.reduce((a, b) => a + b, 0);
            put(slot, members.length * r * inDim, (f) =>
              members.forEach((n, g) => {
                const pair = lora.pairs.get(`${p}${n}.weight`);
                if (pair) f.set(pair.A, g * r * inDim);
              }),
            );
            put(slot + 1, total * r, (f) => {
              let row = 0;
              members.forEach((n, g) => {
                const pair = lora.pairs.get(`${p}${n}.weight`);
                if (pair) for (let i = 0; i < pair.B.length; i++) f[row * r + i] = pair.B[i]! * scale;
                row += outs[g]!;
              });
            });
          };
          group(s + 12, ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj']);
          group(s + 14, ['self_attn.o_proj']);
          group(s + 16, ['mlp.gate_proj', 'mlp.up_proj']);
          group(s + 18, ['mlp.down_proj']);
        }
      }
    });
    this.loaded = m.revision;
  }
}
