import { fromFloat32, toFloat32 } from '../../formats/dtype.ts';
import { ModelConfigError } from '../errors.ts';
import { loraScale, mergeLora, type LoraAdapters } from '../lora.ts';
import { llamaWeights, type LlamaConfig } from './config.ts';

/**
 * A matrix kept in bfloat16, the checkpoint's own bits: half the memory of float32, and half the
 * bytes a decode step streams. Its float32 values are exact (a bfloat16 is a float32's top half).
 */
export class Bfloat16Weight {
  constructor(readonly bits: Uint16Array) {}

  /** The top halves of float32 values that are bfloat16 values (as read from a BF16 tensor): exact. */
  static of(values: Float32Array): Bfloat16Weight {
    const wide = new Uint32Array(values.buffer, values.byteOffset, values.length);
    const bits = new Uint16Array(values.length);
    for (let i = 0; i < bits.length; i++) bits[i] = wide[i]! >>> 16;
    return new Bfloat16Weight(bits);
  }

  get length(): number {
    return this.bits.length;
  }

  toFloat32(): Float32Array {
    const out = new Uint32Array(this.bits.length);
    for (let i = 0; i < out.length; i++) out[i] = this.bits[i]! << 16;
    return new Float32Array(out.buffer);
  }
}

/**
 * A matrix kept in IEEE half precision, an F16 checkpoint's own bits: half the memory of float32.
 * Its float32 values are exact (every half is a float32), so its logits are its widening's.
 */
export class Float16Weight {
  constructor(readonly bits: Uint16Array) {}

  /** Float32 values that are halves (as read from an F16 tensor), as their half bits: exact. */
  static of(values: Float32Array): Float16Weight {
    const bytes = fromFloat32(values, 'F16');
    return new Float16Weight(new Uint16Array(bytes.buffer, bytes.byteOffset, values.length));
  }

  get length(): number {
    return this.bits.length;
  }

  toFloat32(): Float32Array {
    return toFloat32(new Uint8Array(this.bits.buffer, this.bits.byteOffset, this.bits.byteLength), 'F16');
  }
}

/** A weight as the model holds it: float32, or a 16-bit matrix kept as such (bfloat16 or half). */
export type StoredWeight = Float32Array | Bfloat16Weight | Float16Weight;

/** The 16-bit formats a matrix can be held in. */
export type HalfFormat = 'BF16' | 'F16';

const halfFormatOf = (w: StoredWeight | undefined): HalfFormat | null =>
  w instanceof Bfloat16Weight ? 'BF16' : w instanceof Float16Weight ? 'F16' : null;

/**
 * A model of the Llama family: its config and its weights by their Hugging Face names ([out, in]
 * row-major for a projection, as the checkpoint stores them), float32 or (matrices loaded from a
 * bfloat16 checkpoint) bfloat16. `revision` counts changes to the weights, so the decode kernel
 * copies them in again only after an update.
 *
 * With LoRA adapters the weights held are the frozen base and the model computes W + scale·B·A:
 * `weight` gives that (merged on the fly, for export and hashing), `stored` and `baseWeight` the
 * base; the decode kernel reads the base as held (16 bits stay 16 bits) and the adapters beside it.
 */
export class LlamaModel {
  revision = 0;
  /** The positions the model is run at (at most the config's max_position_embeddings). */
  readonly contextLength: number;
  private readonly stores: Map<string, StoredWeight>;
  private lora: LoraAdapters | null = null;

  constructor(
    readonly config: LlamaConfig,
    weights: ReadonlyMap<string, StoredWeight>,
    options: { contextLength?: number } = {},
  ) {
    for (const spec of llamaWeights(config)) {
      const w = weights.get(spec.name);
      const size = spec.shape.reduce((a, b) => a * b, 1);
      if (!w) throw new ModelConfigError('weights', spec.name, 'is missing');
      if (w.length !== size)
        throw new ModelConfigError('weights', spec.name, `has ${w.length} values; [${spec.shape}] needs ${size}`);
    }
    this.stores = new Map(weights);
    this.contextLength = contextLengthOf(config, options.contextLength);
  }

  /** Every weight as it is held, by name. */
  get weights(): ReadonlyMap<string, StoredWeight> {
    return this.stores;
  }

  /** A weight as it is held, the base's with adapters (the decode kernel reads 16-bit matrices as they are). */
  stored(name: string): StoredWeight {
    const w = this.stores.get(name);
    if (!w) throw new ModelConfigError('weights', name, 'is missing');
    return w;
  }

  /** A weight's float32 values as held (the base's with adapters): for a 16-bit matrix a new widened copy. */
  baseWeight(name: string): Float32Array {
    const w = this.stored(name);
    return w instanceof Float32Array ? w : w.toFloat32();
  }

  /**
   * A weight's float32 values as the model computes with them: an adapted one merged (a new array);
   * otherwise baseWeight's (writing to it changes nothing for a 16-bit matrix: setWeight does).
   */
  weight(name: string): Float32Array {
    const pair = this.lora?.pairs.get(name);
    if (!pair) return this.baseWeight(name);
    const base = this.baseWeight(name);
    const r = this.lora!.config.rank;
    const out = new Float32Array(base.length);
    mergeLora(base, pair, loraScale(this.lora!.config), pair.B.length / r, pair.A.length / r, out);
    return out;
  }

  /** The LoRA adapters the model computes with over its weights, or null. */
  get adapters(): LoraAdapters | null {
    return this.lora;
  }

  /** Sets (or with null drops) the adapters over the weights held; the caller moves `revision` on. */
  setAdapters(adapters: LoraAdapters | null): void {
    for (const [name, { A, B }] of adapters?.pairs ?? []) {
      const spec = llamaWeights(this.config).find((w) => w.name === name);
      const r = adapters!.config.rank;
      if (spec?.shape.length !== 2) throw new ModelConfigError('adapters', name, 'is not a matrix of this model');
      const [out, inDim] = spec.shape as [number, number];
      if (A.length !== r * inDim || B.length !== out * r)
        throw new ModelConfigError('adapters', name, `A must be [${r}, ${inDim}] and B [${out}, ${r}]`);
    }
    this.lora = adapters;
  }

  /** The vocabulary head's weights [V, d] as float32: the embedding when tied. */
  get head(): Float32Array {
    return this.weight(this.config.tieEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  }

  /** Replaces a weight's values (float32 from now on); the caller moves `revision` on. */
  setWeight(name: string, values: Float32Array): void {
    const w = this.stored(name);
    if (values.length !== w.length)
      throw new ModelConfigError('weights', name, `has ${w.length} values; ${values.length} were given`);
    if (w instanceof Float32Array) w.set(values);
    else this.stores.set(name, values.slice());
  }

  /**
   * Holds its own copy of every weight held in shared memory (a decode kernel's, where the weights
   * were loaded), before that memory is laid out anew.
   */
  unshare(): void {
    for (const [name, w] of this.stores) {
      const values = w instanceof Float32Array ? w : w.bits;
      if (!(values.buffer instanceof SharedArrayBuffer)) continue;
      if (w instanceof Float32Array) this.stores.set(name, w.slice());
      else
        this.stores.set(
          name,
          w instanceof Bfloat16Weight ? new Bfloat16Weight(w.bits.slice()) : new Float16Weight(w.bits.slice()),
        );
    }
  }

  /** Whether every matrix is held in bfloat16 (the decode kernel then reads them so). */
  get bfloat16(): boolean {
    return this.matrixFormat === 'BF16';
  }

  /** The 16-bit format every matrix is held in (the decode kernel then reads them so), or null. */
  get matrixFormat(): HalfFormat | null {
    const matrices = llamaWeights(this.config).filter((s) => s.shape.length === 2);
    const format = halfFormatOf(this.stores.get(matrices[0]!.name));
    return matrices.every((s) => halfFormatOf(this.stores.get(s.name)) === format) ? format : null;
  }

  /** Bytes the weights take as held. */
  get weightBytes(): number {
    let n = 0;
    for (const w of this.stores.values()) n += w instanceof Float32Array ? w.byteLength : w.bits.byteLength;
    return n;
  }
}

/** Positions a model runs at unless told otherwise (the rotary tables and the attention scratch are sized by it). */
export const DEFAULT_CONTEXT = 32768;

/** The positions a model of `config` runs at when asked for `requested` (default DEFAULT_CONTEXT), at most its max_position_embeddings. */
export const contextLengthOf = (config: LlamaConfig, requested?: number): number =>
  Math.min(requested ?? DEFAULT_CONTEXT, config.maxPositions);
