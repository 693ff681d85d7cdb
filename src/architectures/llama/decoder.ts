import { Worker } from 'node:worker_threads';
import { toFloat32 } from '../../formats/dtype.ts';
import {
  KERNEL_BASE,
  KernelError,
  KernelHost,
  align16,
  ceil8,
  kernelThreads,
  layModel,
  type ModelLayout,
  type PartStep,
} from '../kernel/kernel-host.ts';
import { LLAMA_KERNEL_WASM } from './kernel/llama-kernel-wasm.ts';
import { Bfloat16Weight, type Float16Weight, type HalfFormat, type LlamaModel } from './model.ts';
import { ropeTables } from './rope.ts';
import { heldBytes, llamaWeights, type LlamaConfig } from './config.ts';
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
const FLAG_HIDDEN_IN = 64;
const FLAG_HIDDEN_OUT = 128;

// The control block, in the first memory's page 0 (which the kernel leaves to the host): i32 slots
// 0–9 the step's arguments, then the generation (moved on to start a step), stop, and the part the
// step runs in; each memory's barrier after it, at the same offset.
const CTL = KERNEL_BASE - 256;
const SYNC = CTL + 64;
const C_GEN = 10;
const C_STOP = 11;
const C_PART = 12;
const MAX_PAGES = 65536;

/**
 * Bytes of weights a model may keep in one memory; a bigger one is split by layers into parts of at
 * most SPLIT_PART_BYTES each (4 GiB a memory: the rest is its layers' KV caches and the scratch).
 */
export const ONE_MEMORY_WEIGHT_BYTES = 3_600_000_000;
export const SPLIT_PART_BYTES = 3_000_000_000;

/**
 * A worker's part: instantiate the kernel on each shared memory, say so, and run its share of every
 * step in the part the host names. It parks in JS: under Node 20's optimizing compiler a
 * `memory.atomic.wait32` parking loop inside the kernel never woke on the host's notify.
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memories, ctl, thread, generation } = workerData;
const kernels = memories.map((memory) => new WebAssembly.Instance(module, { env: { memory } }).exports);
const c = new Int32Array(memories[0].buffer, ctl, 16);
parentPort.postMessage('ready');
for (let seen = generation; ; ) {
  Atomics.wait(c, ${C_GEN}, seen);
  seen = Atomics.load(c, ${C_GEN});
  if (Atomics.load(c, ${C_STOP})) break;
  kernels[c[${C_PART}]].step(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], thread, c[8], c[9]);
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

const newMemory = () => new WebAssembly.Memory({ initial: 2, maximum: MAX_PAGES, shared: true });

/** A part of a split model: its layers [first, first + layers). */
export interface PartLayers {
  first: number;
  layers: number;
}

/**
 * The layer ranges of a model's parts: one when its weights fit one memory, else as few as hold at
 * most `partBytes` each, balanced by bytes, the last one also holding the final norm, head and
 * embedding (`half`: the matrices are 16-bit).
 */
export function planParts(config: LlamaConfig, half: boolean, partBytes = SPLIT_PART_BYTES): PartLayers[] {
  const perLayer = new Array<number>(config.numLayers).fill(0);
  let tail = 0;
  for (const w of llamaWeights(config)) {
    const bytes = align16(heldBytes(w.shape, half));
    const layer = /^model\.layers\.(\d+)\./.exec(w.name);
    if (layer) perLayer[Number(layer[1])]! += bytes;
    else tail += bytes;
  }
  const total = perLayer.reduce((a, b) => a + b, tail);
  if (total <= ONE_MEMORY_WEIGHT_BYTES) return [{ first: 0, layers: config.numLayers }];
  // Cut before a layer when it would pass the budget, or when its middle passes the even share.
  const target = total / Math.ceil(total / partBytes);
  const parts: PartLayers[] = [];
  let first = 0;
  let bytes = 0;
  perLayer.forEach((b, l) => {
    if (l > first && (bytes + b > partBytes || bytes + b / 2 > target)) {
      parts.push({ first, layers: l - first });
      first = l;
      bytes = 0;
    }
    bytes += b;
  });
  if (bytes + tail > partBytes) {
    parts.push({ first, layers: config.numLayers - first });
    first = config.numLayers;
  }
  parts.push({ first, layers: config.numLayers - first });
  return parts;
}

/**
 * The Llama family's decode kernel (kernel/llama-step.as.ts) on the shared kernel host. The weights
 * go into the kernel's memory as the checkpoint stores them ([out, in]; the matrices float32, or
 * 16-bit when the model holds every one so), q/k/v and gate/up side by side so that each pair is one
 * matmul; the embedding serves as the head when tied. They are copied in when the model's revision
 * changed since the last copy.
 *
 * A model past one memory is split by layers (planParts): each part's memory holds its layers and
 * their caches, the last one the final norm and head; a step runs the parts in turn, the residual
 * stream copied from each to the next, and the embedding rows are looked up here for the first (the
 * same values the kernel would widen: the logits are the same bits as in one memory).
 *
 * The memories are shared, and a step runs on `threads` threads: this one and workers parked
 * between steps, each doing its share of every phase (the logits are the same bits for any number
 * of them). The workers start with the first `prepare` and stop when the decoder is gone.
 */
export class LlamaDecoder extends KernelHost {
  private loaded = -1;
  private readonly memories: WebAssembly.Memory[];
  /** Where the model's matrices were loaded, while the model still holds them there. */
  private placement: KernelPlacement | null;
  private workers: Promise<void> | null = null;
  readonly threads: number;

  constructor(
    readonly model: LlamaModel,
    options: {
      threads?: number;
      /** The layers of each memory (default planParts'; tests split small models). */
      parts?: readonly PartLayers[];
      /** Memories the model's matrices were loaded into (placeWeights): the decoder runs in them. */
      placement?: KernelPlacement;
    } = {},
  ) {
    const c = model.config;
    const placed = options.placement;
    const memory = placed?.memories[0] ?? newMemory();
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
    this.threads = options.threads ?? kernelThreads();
    this.memories = [memory];
    this.placement = placed ?? null;
    const layout = placed?.parts ?? options.parts ?? planParts(c, model.matrixFormat !== null);
    const covered = layout.reduce((next, p) => (p.first === next && p.layers >= 0 ? next + p.layers : Number.NaN), 0);
    if (covered !== c.numLayers || layout.length === 0)
      throw new KernelError(
        `the parts ${JSON.stringify(layout)} do not cover layers 0 to ${c.numLayers - 1} once each, in order`,
      );
    this.parts = layout.map(({ first, layers }, p) => {
      if (p > 0) this.memories.push(placed?.memories[p] ?? newMemory());
      return {
        exports: p === 0 ? this.exports : this.instantiate(this.memories[p]),
        firstLayer: first,
        layers,
        sessionBase: 0,
      };
    });
  }

  /** Starts the workers (threads − 1 of them) and waits until each is parked. */
  private startWorkers(): Promise<void> {
    this.workers ??= (async () => {
      const workers: Worker[] = [];
      const ctl = this.memories[0]!;
      // The generation now: a step started before a worker parks still counts as new to it.
      const generation = Atomics.load(new Int32Array(ctl.buffer, CTL, 16), C_GEN);
      await Promise.all(
        Array.from({ length: this.threads - 1 }, (_, i) => {
          const worker = new Worker(WORKER, {
            eval: true,
            workerData: { module: this.module, memories: this.memories, ctl: CTL, thread: i + 1, generation },
          });
          workers.push(worker);
          return new Promise<void>((resolve, reject) => {
            worker.once('message', () => resolve());
            worker.once('error', reject);
          });
        }),
      );
      for (const w of workers) w.unref();
      stopWorkers.register(this, { memory: ctl, workers });
    })();
    return this.workers;
  }

  override stepScratch(S: number, R: number, p = 0): number {
    return this.parts[p]!.exports.scratchBytes(this.modelPtr, S, R, this.shape.contextLength, this.threads);
  }

  override runStep(steps: readonly PartStep[], R: number, S: number, out: number): void {
    const C = this.shape.contextLength;
    const T = this.threads;
    const d8 = ceil8(this.model.config.hiddenSize);
    steps.forEach((step, p) => {
      // The residual stream (the scratch's first S·d8 floats) in from the part before, or from the embedding.
      if (this.parts.length > 1) {
        const into = new Float32Array(this.memories[p]!.buffer, step.scratch, S * d8);
        if (p === 0) this.embed(new Int32Array(this.memories[0]!.buffer, step.tokens, S), into, d8);
        else into.set(new Float32Array(this.memories[p - 1]!.buffer, steps[p - 1]!.scratch, S * d8));
      }
      if (T > 1) {
        const ctl = new Int32Array(this.memories[0]!.buffer, CTL, 16);
        ctl.set([this.modelPtr, step.rows, R, step.tokens, S, out, step.scratch, C, T, SYNC]);
        ctl[C_PART] = p;
        Atomics.add(ctl, C_GEN, 1);
        Atomics.notify(ctl, C_GEN);
      }
      // This thread is thread 0; the part's step ends at a barrier every thread reaches.
      this.parts[p]!.exports.step(this.modelPtr, step.rows, R, step.tokens, S, out, step.scratch, C, 0, T, SYNC);
    });
  }

  /** The tokens' embedding rows, widened to float32 as the kernel would, into rows of d8 floats. */
  private embed(tokens: Int32Array, into: Float32Array, d8: number): void {
    const d = this.model.config.hiddenSize;
    const w = this.model.stored('model.embed_tokens.weight');
    const wide = new Uint32Array(into.buffer, into.byteOffset, into.length);
    tokens.forEach((id, s) => {
      if (w instanceof Float32Array) into.set(w.subarray(id * d, (id + 1) * d), s * d8);
      else if (w instanceof Bfloat16Weight) for (let i = 0; i < d; i++) wide[s * d8 + i] = w.bits[id * d + i]! << 16;
      else into.set(toFloat32(new Uint8Array(w.bits.buffer, w.bits.byteOffset + id * d * 2, d * 2), 'F16'), s * d8);
    });
  }

  private static readonly byModel = new WeakMap<LlamaModel, LlamaDecoder>();

  /** Makes the decoder running in the memories `model`'s matrices were loaded into its decoder. */
  static adopt(model: LlamaModel, placement: KernelPlacement): LlamaDecoder {
    if (model.contextLength !== placement.contextLength || model.matrixFormat !== placement.half)
      throw new KernelError('the model was not loaded into this placement (its context or dtype differ)');
    const d = new LlamaDecoder(model, { placement });
    LlamaDecoder.byModel.set(model, d);
    return d;
  }

  /** The model's decoder (one per model; its memories hold that model's weights). */
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
    // Weights loaded into these memories in one layout are copied out before another one overwrites them.
    if (this.placement && this.model.matrixFormat !== this.placement.half) {
      this.model.unshare();
      this.placement = null;
    }
    this.parts.forEach((_, p) => this.writePart(p));
    this.loaded = this.model.revision;
  }

  /** Writes part p (partLayout), its arrays filled from the model's weights. */
  private writePart(p: number): void {
    const m = this.model;
    const { firstLayer, layers } = this.parts[p]!;
    const facts: PartFacts = {
      config: m.config,
      half: m.matrixFormat,
      rank: m.adapters?.config.rank ?? 0,
      contextLength: m.contextLength,
      first: firstLayer,
      layers,
      split: this.parts.length > 1,
      last: p === this.parts.length - 1,
    };
    this.writeModel(partSlots(facts), partLayout(facts, m), p);
  }
}

/** What decides a part's layout: the model's shape and dtype, its adapters' rank, its layers. */
export interface PartFacts {
  config: LlamaConfig;
  /** The matrices' 16-bit format, or null: float32. */
  half: HalfFormat | null;
  rank: number;
  contextLength: number;
  first: number;
  layers: number;
  /** The model is in several parts (the residual comes in and goes out through the scratch). */
  split: boolean;
  /** The last part: the final norm and the head (with the embedding). */
  last: boolean;
}

const partSlots = (f: PartFacts) => M_LAYERS + f.layers * LAYER_SLOTS;

/** Copies `src` to f at `at`, unless it is already there (a weight loaded into this memory). */
function place<A extends Float32Array | Uint16Array>(f: A, src: A, at: number): void {
  if (src.buffer === f.buffer && src.byteOffset === f.byteOffset + at * f.BYTES_PER_ELEMENT) return;
  f.set(src, at);
}

/**
 * Part p's memory as the kernel reads it: the table, then (in the last part) the embedding, head and
 * final norm, the rotary tables, each layer's base arrays, then any adapters (so the base's places
 * do not move when adapters come or go). Fills read `model` when the part is written; `onMatrix`
 * hears which weights each matrix slot stacks (what a loader needs to read weights into place).
 */
function partLayout(
  f: PartFacts,
  model: LlamaModel | null,
  onMatrix?: (slot: number, names: string[]) => void,
): ModelLayout {
  const c = f.config;
  const { hiddenSize: d, numHeads: H, numKvHeads: Hkv, headDim: dh, intermediateSize: M, vocabSize: V } = c;
  const m = () => {
    if (!model) throw new KernelError('a part laid out without a model cannot be filled');
    return model;
  };
  const plain = (x: () => Float32Array) => (out: Float32Array) => out.set(x());
  const stacked =
    <A extends Float32Array | Uint16Array>(parts: () => A[]) =>
    (out: A) => {
      let at = 0;
      for (const part of parts()) {
        place(out, part, at);
        at += part.length;
      }
    };
  return (table, put, put16) => {
    const matrix = (slot: number, size: number, names: string[]) => {
      onMatrix?.(slot, names);
      if (f.half)
        put16(
          slot,
          size,
          stacked(() => names.map((n) => (m().stored(n) as Bfloat16Weight | Float16Weight).bits)),
        );
      else
        put(
          slot,
          size,
          stacked(() => names.map((n) => m().baseWeight(n))),
        );
    };
    table.set([d, H, Hkv, dh, f.layers, M, V], 0);
    table[7] =
      (c.qkvBias ? FLAG_QKV_BIAS : 0) |
      (c.oBias ? FLAG_O_BIAS : 0) |
      (c.mlpBias ? FLAG_MLP_BIAS : 0) |
      (c.qkNorm ? FLAG_QK_NORM : 0) |
      (f.half === 'BF16' ? FLAG_BF16 : f.half === 'F16' ? FLAG_F16 : 0) |
      (f.split ? FLAG_HIDDEN_IN : 0) |
      (f.last ? 0 : FLAG_HIDDEN_OUT);
    table[8] = new Int32Array(Float32Array.of(c.rmsNormEps).buffer)[0]!;
    table[M_RANK] = f.rank;
    if (f.last) {
      matrix(9, V * d, ['model.embed_tokens.weight']);
      if (c.tieEmbeddings) table[10] = table[9]!;
      else matrix(10, V * d, ['lm_head.weight']);
      put(
        11,
        d,
        plain(() => m().weight('model.norm.weight')),
      );
    }
    const rope = (() => {
      let tables: { cos: Float32Array; sin: Float32Array } | null = null;
      return () => (tables ??= ropeTables(c, f.contextLength));
    })();
    const half = dh / 2;
    put(
      12,
      f.contextLength * half,
      plain(() => rope().cos),
    );
    put(
      13,
      f.contextLength * half,
      plain(() => rope().sin),
    );
    const qkvRows = (H + 2 * Hkv) * dh;
    for (let j = 0; j < f.layers; j++) {
      const pre = `model.layers.${f.first + j}.`;
      const w = (name: string) => () => m().weight(pre + name);
      const s = M_LAYERS + j * LAYER_SLOTS;
      put(s, d, plain(w('input_layernorm.weight')));
      matrix(
        s + 1,
        qkvRows * d,
        ['q', 'k', 'v'].map((x) => `${pre}self_attn.${x}_proj.weight`),
      );
      if (c.qkvBias)
        put(
          s + 2,
          qkvRows,
          stacked(() => ['q', 'k', 'v'].map((x) => w(`self_attn.${x}_proj.bias`)())),
        );
      matrix(s + 3, d * H * dh, [`${pre}self_attn.o_proj.weight`]);
      if (c.oBias) put(s + 4, d, plain(w('self_attn.o_proj.bias')));
      if (c.qkNorm) {
        put(s + 5, dh, plain(w('self_attn.q_norm.weight')));
        put(s + 6, dh, plain(w('self_attn.k_norm.weight')));
      }
      put(s + 7, d, plain(w('post_attention_layernorm.weight')));
      matrix(s + 8, 2 * M * d, [`${pre}mlp.gate_proj.weight`, `${pre}mlp.up_proj.weight`]);
      if (c.mlpBias)
        put(
          s + 9,
          2 * M,
          stacked(() => [w('mlp.gate_proj.bias')(), w('mlp.up_proj.bias')()]),
        );
      matrix(s + 10, d * M, [`${pre}mlp.down_proj.weight`]);
      if (c.mlpBias) put(s + 11, d, plain(w('mlp.down_proj.bias')));
    }
    const r = f.rank;
    if (!r) return;
    // LoRA adapters beside the base (the base as held: 16 bits stay 16 bits), float32, B times alpha/r.
    const shapeOf = new Map(llamaWeights(c).map((x) => [x.name, x.shape]));
    for (let j = 0; j < f.layers; j++) {
      const pre = `model.layers.${f.first + j}.`;
      const s = M_LAYERS + j * LAYER_SLOTS;
      const group = (slot: number, members: string[]) => {
        const shapes = members.map((n) => shapeOf.get(`${pre}${n}.weight`)!);
        const inDim = shapes[0]![1]!;
        const outs = shapes.map((sh) => sh[0]!);
        const total = outs.reduce((a, b) => a + b, 0);
        const lora = () => m().adapters!;
        put(slot, members.length * r * inDim, (out) =>
          members.forEach((n, g) => {
            const pair = lora().pairs.get(`${pre}${n}.weight`);
            if (pair) out.set(pair.A, g * r * inDim);
          }),
        );
        put(slot + 1, total * r, (out) => {
          const scale = loraScale(lora().config);
          let row = 0;
          members.forEach((n, g) => {
            const pair = lora().pairs.get(`${pre}${n}.weight`);
            if (pair) for (let i = 0; i < pair.B.length; i++) out[row * r + i] = pair.B[i]! * scale;
            row += outs[g]!;
          });
        });
      };
      group(s + 12, ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj']);
      group(s + 14, ['self_attn.o_proj']);
      group(s + 16, ['mlp.gate_proj', 'mlp.up_proj']);
      group(s + 18, ['mlp.down_proj']);
    }
  };
}

/**
 * Where a model's matrices go in the decode kernel's memories, decided from its config and dtype
 * before any weight is read, so a loader reads each matrix into its place: the model then holds
 * views of the kernel's memory, and its weights are in memory once.
 */
export interface KernelPlacement {
  parts: PartLayers[];
  memories: WebAssembly.Memory[];
  half: HalfFormat | null;
  contextLength: number;
  /** Each matrix's place: its 16-bit bits, or its float32 values. */
  views: Map<string, Float32Array | Uint16Array>;
}

/** The memories (grown to hold the weights) and each matrix's view, for a model without adapters. */
export function placeWeights(config: LlamaConfig, half: HalfFormat | null, contextLength: number): KernelPlacement {
  const parts = planParts(config, half !== null);
  const sizes = new Map(llamaWeights(config).map((w) => [w.name, w.shape.reduce((a, b) => a * b, 1)]));
  const views = new Map<string, Float32Array | Uint16Array>();
  const memories = parts.map((part, p) => {
    const facts: PartFacts = {
      config,
      half,
      rank: 0,
      contextLength,
      first: part.first,
      layers: part.layers,
      split: parts.length > 1,
      last: p === parts.length - 1,
    };
    const stacks: Array<{ slot: number; names: string[] }> = [];
    const { table, end } = layModel(
      KERNEL_BASE,
      partSlots(facts),
      partLayout(facts, null, (slot, names) => stacks.push({ slot, names })),
    );
    const memory = newMemory();
    memory.grow(Math.max(0, Math.ceil(end / 65536) - 2));
    for (const { slot, names } of stacks) {
      let at = table[slot]! >>> 0; // an address past 2^31 reads negative as an i32
      for (const name of names) {
        const n = sizes.get(name)!;
        views.set(name, half ? new Uint16Array(memory.buffer, at, n) : new Float32Array(memory.buffer, at, n));
        at += n * (half ? 2 : 4);
      }
    }
    return memory;
  });
  return { parts, memories, half, contextLength, views };
}
