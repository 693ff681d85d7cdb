import * as tf from '@tensorflow/tfjs';
import { KVCache } from '../kv-cache.ts';
import { attendRow, copyMixRow } from './row-attention.ts';
import { ModelError } from './model-config.ts';
import { gelu, layerNorm, type GPTModel } from './model.ts';

/** One row of an incremental step: new tokens on top of an optional cache. */
export interface RowStep {
  tokens: readonly number[];
  /** The token just before tokens[0] (the cache's last token), for the token shift. */
  prevToken?: number;
  /** The row's cache; the new tokens' keys/values are appended to it in place. */
  cache: KVCache;
}

/**
 * The GPT's incremental forward in tfjs tensors, generation's decoder on the webgpu and tfjs-node
 * backends (generate.ts; wasm and cpu use the decode kernel, kernel/): each row feeds its new tokens on
 * top of its own cache. Rows are packed (no padding) for the dense layers, which run batched in tfjs; attention runs in
 * JS per row on that row's own keys (kv-cache.ts), so every number a row's logits depend on is
 * computed from that row alone: bit-identical whatever else is in the batch. Appends the new
 * keys/values to each row's cache and returns the logits of each row's last new token, [R, V].
 */
export async function forwardRows(model: GPTModel, rows: readonly RowStep[]): Promise<tf.Tensor2D> {
  const { dModel: d, nHeads: H, contextLength: C, nLayers: L } = model.config;
  const lens = rows.map((r) => r.tokens.length);
  const starts = rows.map((r) => r.cache.length);
  rows.forEach((r, i) => {
    if (lens[i]! === 0) throw new ModelError(`row ${i} has no new tokens`);
    if (starts[i]! + lens[i]! > C) {
      throw new ModelError(`row ${i}: ${starts[i]! + lens[i]!} tokens exceed the context (${C})`);
    }
    if (r.cache.layers !== L || r.cache.width !== d || r.cache.copyWidth !== (model.copy ? d : 0)) {
      throw new ModelError(`row ${i}: the cache is for another model shape`);
    }
    r.cache.reserve(lens[i]!);
  });
  const S = lens.reduce((a, b) => a + b, 0);
  const flat = new Int32Array(S);
  const pos = new Int32Array(S);
  const lastIdx = new Int32Array(rows.length);
  let off = 0;
  rows.forEach((r, i) => {
    flat.set(r.tokens, off);
    for (let j = 0; j < lens[i]!; j++) pos[off + j] = starts[i]! + j;
    off += lens[i]!;
    lastIdx[i] = off - 1;
  });
  const c = model.copy;
  // No tf.tidy around the whole pass: each layer reads its q/k/v back with an await (data(), not
  // dataSync(): the webgpu backend has no synchronous read in Node), so the tensors that live
  // across layers (positions, rotary rows, the residual stream x) are disposed by hand.
  const held: tf.Tensor[] = [];
  let x: tf.Tensor2D | null = null;
  try {
    const posIds = tf.tensor1d(pos, 'int32');
    held.push(posIds);
    const rope = model.ropeRows(posIds);
    if (rope) held.push(rope.cos, rope.sin);
    const rotary = (t: tf.Tensor2D) => model.rotate(t, rope);
    x = tf.tidy(() => {
      let e = tf.gather(model.tokEmb, tf.tensor1d(flat, 'int32')) as tf.Tensor2D;
      if (model.shiftGate) {
        // Previous token of each position: within the row, or the row's prevToken (none: zeros).
        const prevIds = new Int32Array(S);
        const has = new Float32Array(S);
        let o = 0;
        rows.forEach((r, i) => {
          for (let j = 0; j < lens[i]!; j++) {
            const p = j > 0 ? r.tokens[j - 1] : r.prevToken;
            if (p !== undefined) {
              prevIds[o + j] = p;
              has[o + j] = 1;
            }
          }
          o += lens[i]!;
        });
        const prev = tf.gather(model.tokEmb, tf.tensor1d(prevIds, 'int32')).mul(tf.tensor2d(has, [S, 1]));
        e = e.add(prev.mul(model.shiftGate));
      }
      if (model.posEmb) e = e.add(tf.gather(model.posEmb, posIds));
      return e;
    });
    const scale = 1 / Math.sqrt(d / H);
    for (let l = 0; l < L; l++) {
      const p = model.layers[l]!;
      const xl: tf.Tensor2D = x;
      const qkv = tf.tidy(() => {
        const h = layerNorm(xl, p.ln1g, p.ln1b);
        return tf.concat(
          [
            rotary(tf.matMul(h, p.wq).add(p.bq)).mul(scale),
            rotary(tf.matMul(h, p.wk).add(p.bk)),
            tf.matMul(h, p.wv).add(p.bv),
          ],
          1,
        );
      });
      let data: Float32Array;
      try {
        data = (await qkv.data()) as Float32Array; // [S, 3d]
      } finally {
        qkv.dispose();
      }
      const q = new Float32Array(S * d);
      const ctx = new Float32Array(S * d);
      let at = 0;
      rows.forEach((r, i) => {
        const k = r.cache.k[l]!;
        const v = r.cache.v[l]!;
        for (let j = 0; j < lens[i]!; j++) {
          const src = (at + j) * 3 * d;
          q.set(data.subarray(src, src + d), (at + j) * d);
          k.set(data.subarray(src + d, src + 2 * d), (starts[i]! + j) * d);
          v.set(data.subarray(src + 2 * d, src + 3 * d), (starts[i]! + j) * d);
        }
        attendRow(q, at * d, k, v, starts[i]!, lens[i]!, H, d, ctx, at * d);
        at += lens[i]!;
      });
      x = tf.tidy(() => {
        const y = xl.add(tf.matMul(tf.tensor2d(ctx, [S, d]), p.wo).add(p.bo)) as tf.Tensor2D;
        const h2 = layerNorm(y, p.ln2g, p.ln2b);
        return y.add(tf.matMul(gelu(tf.matMul(h2, p.w1).add(p.b1)), p.w2).add(p.b2)) as tf.Tensor2D;
      });
      xl.dispose();
    }
    const xf: tf.Tensor2D = x;
    if (!c) {
      const logits = tf.tidy(() => {
        const last = layerNorm(tf.gather(xf, tf.tensor1d(lastIdx, 'int32')) as tf.Tensor2D, model.lnfG, model.lnfB);
        return tf.matMul(last, model.tokEmb, false, true) as tf.Tensor2D;
      });
      commit(rows, lens, starts, null, d);
      return logits;
    }
    const [vocabT, keysT, queriesT, gatesT] = tf.tidy(() => {
      const hAll = layerNorm(xf, model.lnfG, model.lnfB);
      const lastT = tf.tensor1d(lastIdx, 'int32');
      const last = tf.gather(hAll, lastT) as tf.Tensor2D;
      const lastRope = model.ropeRows(tf.gather(posIds, lastT) as tf.Tensor1D);
      return [
        tf.matMul(last, model.tokEmb, false, true),
        rotary(tf.matMul(hAll, c.wk)),
        model.rotate(tf.matMul(last, c.wq), lastRope).mul(1 / Math.sqrt(d)),
        tf.sigmoid(tf.matMul(last, c.gateW).add(c.gateB)),
      ];
    });
    held.push(vocabT!, keysT!, queriesT!, gatesT!);
    const [vocab, keys, queries, gates] = (await Promise.all([
      vocabT!.data(),
      keysT!.data(),
      queriesT!.data(),
      gatesT!.data(),
    ])) as Float32Array[];
    commit(rows, lens, starts, keys!, d);
    const V = model.config.vocabSize;
    const mixed = new Float32Array(rows.length * V);
    rows.forEach((r, i) => {
      const query = queries!.subarray(i * d, (i + 1) * d);
      mixed.set(copyMixRow(vocab!.subarray(i * V, (i + 1) * V), query, r.cache, r.cache.length, gates![i]!), i * V);
    });
    return tf.tensor2d(mixed, [rows.length, V]);
  } finally {
    tf.dispose(held);
    x?.dispose();
  }
}

/** Records the new tokens (and copy keys) in each row's cache and moves its length on. */
function commit(
  rows: readonly RowStep[],
  lens: readonly number[],
  starts: readonly number[],
  copyKeys: Float32Array | null,
  d: number,
): void {
  let o = 0;
  rows.forEach((r, i) => {
    r.cache.ids.set(r.tokens, starts[i]!);
    if (copyKeys) r.cache.copyKeys.set(copyKeys.subarray(o * d, (o + lens[i]!) * d), starts[i]! * d);
    o += lens[i]!;
    r.cache.length = starts[i]! + lens[i]!;
  });
}

/** An empty cache for `model`. */
export function newCache(model: GPTModel, capacity = 64): KVCache {
  return new KVCache(model.config.nLayers, model.config.dModel, capacity, model.copy ? model.config.dModel : 0);
}
