import * as tf from '@tensorflow/tfjs';
import {
  finished,
  generateOnKernel,
  sampleInto,
  startRows,
  usableCache,
  type ActiveRow,
  type GenerateRequest,
  type GenerateResult,
  type GenerationOptions,
} from '../../architectures/generation.ts';
import { forwardRows, newCache } from '../../architectures/gpt/decode.ts';
import { KernelDecoder } from '../../architectures/gpt/kernel/kernel-decoder.ts';
import type { GPTModel } from '../../architectures/gpt/model.ts';

/**
 * The GPT's batched incremental decoding with a KV cache (the loop and the sampling are the
 * architectures' own: src/architectures/generation.ts). Every row prefills only the tokens its cache
 * does not hold, then all rows decode one token per step, by one of two decoders, each giving a
 * row's logits bit-identical alone or in any batch:
 * - `kernel` (the wasm and cpu backends): the decode kernel (kernel/), one WebAssembly SIMD call
 *   per step for the whole model over the packed rows, the rows' caches in its memory;
 * - `tensors` (webgpu, tfjs-node): decode.ts forwardRows, dense layers batched in tfjs, attention
 *   in JS per row on the row's own keys.
 * `useCache: false` recomputes the whole sequence each step: the reference the cache is tested against.
 */
export interface GenerateOptions extends GenerationOptions {
  /** false: recompute the whole sequence every step (the reference the cache is tested against). */
  useCache?: boolean;
  /** Pad id for batch padding (never attended to). */
  pad?: number;
  /** Which decoder runs the cached path (default: `defaultDecoder()`, by backend). */
  decoder?: Decoder;
}

export type Decoder = 'kernel' | 'tensors';

/**
 * The decoder for the active backend: the kernel where the model's weights can be read
 * synchronously on the CPU (wasm, cpu), tfjs tensors where they live on a device (webgpu, tfjs-node).
 */
export function defaultDecoder(): Decoder {
  const backend = tf.getBackend();
  return backend === 'wasm' || backend === 'cpu' ? 'kernel' : 'tensors';
}

export async function generate(
  model: GPTModel,
  rows: readonly GenerateRequest[],
  options: GenerateOptions = {},
): Promise<GenerateResult[]> {
  if (options.useCache === false) {
    const { results, active } = startRows(rows, model.config.contextLength, options);
    if (active.length > 0) await decodeUncached(model, active, options, options.pad ?? 0);
    return results;
  }
  if ((options.decoder ?? defaultDecoder()) === 'kernel')
    return generateOnKernel(KernelDecoder.for(model), rows, options);
  const { results, active } = startRows(rows, model.config.contextLength, options);
  if (active.length > 0) await decodeCached(model, active, options);
  return results;
}

async function decodeCached(model: GPTModel, rows: ActiveRow[], options: GenerateOptions): Promise<void> {
  // Each row feeds what its cache lacks (first step) or its last sampled token (later steps).
  let feed = rows.map((a) => {
    const cache = usableCache(a.row);
    a.kv = cache
      ? cache.kv.clone(a.row.tokens.length - cache.tokens.length + a.limit)
      : newCache(model, a.row.tokens.length + a.limit);
    a.fed = a.row.tokens.slice();
    a.out.prefilled = a.row.tokens.length - (cache?.tokens.length ?? 0);
    return a.row.tokens.slice(cache?.tokens.length ?? 0);
  });
  let live = rows;
  while (live.length > 0) {
    const steps = live.map((a, i) => {
      // a.fed already ends with this step's tokens; the one before them feeds the token shift.
      const before = a.fed.length - feed[i]!.length - 1;
      return { tokens: feed[i]!, cache: a.kv!, ...(before >= 0 ? { prevToken: a.fed[before]! } : {}) };
    });
    const logits = await forwardRows(model, steps);
    const V = logits.shape[1];
    let data: Float32Array;
    try {
      data = (await logits.data()) as Float32Array;
    } finally {
      logits.dispose();
    }
    const next: ActiveRow[] = [];
    const nextFeed: number[][] = [];
    live.forEach((a, i) => {
      const token = sampleInto(a, data.slice(i * V, (i + 1) * V), options);
      if (finished(a, token, options)) {
        if (options.keepCache) a.out.cache = { tokens: a.fed.slice(), kv: a.kv!, bytes: a.kv!.bytes };
      } else {
        a.fed.push(token);
        next.push(a);
        nextFeed.push([token]);
      }
    });
    live = next;
    feed = nextFeed;
  }
}

async function decodeUncached(
  model: GPTModel,
  rowsIn: ActiveRow[],
  options: GenerateOptions,
  pad: number,
): Promise<void> {
  let rows = rowsIn;
  for (const a of rows) a.out.prefilled = a.row.tokens.length;
  for (;;) {
    const seqs = rows.map((a) => [...a.row.tokens, ...a.out.tokens]);
    const T = Math.max(...seqs.map((s) => s.length));
    const ids = new Int32Array(rows.length * T).fill(pad);
    seqs.forEach((s, b) => ids.set(s, b * T));
    const input = tf.tensor2d(ids, [rows.length, T], 'int32');
    const { logits, values } = model.forward(input);
    tf.dispose([input, values]);
    const last = await pickRows(
      logits,
      seqs.map((s, b) => b * T + s.length - 1),
    );
    const keep: ActiveRow[] = [];
    rows.forEach((a, b) => {
      const token = sampleInto(a, last[b]!, options);
      if (!finished(a, token, options)) keep.push(a);
    });
    if (keep.length === 0) break;
    rows = keep;
  }
}

/** The logits at flat rows b·T + t of [B, T, V]; disposes `logits`. */
async function pickRows(logits: tf.Tensor3D, flatRows: number[]): Promise<Float32Array[]> {
  const [B, T, V] = logits.shape;
  const picked = tf.tidy(() => tf.gather(logits.reshape([B * T, V]), tf.tensor1d(flatRows, 'int32')));
  logits.dispose();
  try {
    const data = (await picked.data()) as Float32Array;
    return flatRows.map((_, i) => data.slice(i * V, (i + 1) * V));
  } finally {
    picked.dispose();
  }
}
