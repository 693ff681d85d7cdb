import * as tf from '@tensorflow/tfjs';
import { createRng, type Rng } from '../../core/rng.ts';
import { AgentR1Error } from '../../core/errors.ts';
import { MASK_VALUE, type GPTModel, type LayerKV } from './model.ts';

/**
 * Batched incremental decoding with a KV cache.
 *
 * Every row prefills only the tokens its cache does not hold, then all rows decode one token per
 * step. Rows have their own positions and key-validity masks, so rows of different lengths share
 * a batch; padded keys get an additive −1e9 and contribute exact zeros, so a row's logits do not
 * depend on its neighbours. Each row samples from its own PRNG stream (seeded by the row's seed),
 * so its tokens are the same alone or in any batch. Finished rows leave the batch.
 */
export interface SamplingOptions {
  /** 0 = greedy. Default 1. */
  temperature?: number;
  /** Keep only the k most likely tokens (0 or undefined: all). */
  topK?: number;
  /** Nucleus sampling: the smallest set with probability ≥ p (1 or undefined: all). */
  topP?: number;
}

/** The keys/values of one sequence, kept between an episode's turns. */
export interface RowCache {
  /** The token ids whose keys/values `kv` holds, in order. */
  tokens: number[];
  /** Per layer, [1, H, tokens.length, dh]. */
  kv: LayerKV[];
  bytes: number;
}

export interface GenerateRow {
  /** The whole history, as ids. */
  tokens: readonly number[];
  seed: number;
  maxTokens: number;
  /** A cache from an earlier turn; used when its tokens are a prefix of `tokens`. */
  cache?: RowCache;
}

export type StopReason = 'eos' | 'stop' | 'length' | 'context';

export interface GenerateResult {
  tokens: number[];
  /** log π(token) under the model's own (untempered) distribution, as scoreSequences computes it. */
  logprobs: number[];
  stop: StopReason;
  /** Keys/values of every token fed to the model (history + generated tokens but the last); owned by the caller. */
  cache?: RowCache;
  /** How many history tokens were prefilled (the rest came from the cache). */
  prefilled: number;
  /** The logits each generated token was sampled from, when `returnLogits` is set. */
  logits?: Float32Array[];
}

export interface GenerateOptions {
  sampling?: SamplingOptions;
  /** Tokens that end a row: included in the output (`</tool_call>`, `</answer>`). */
  stopTokens?: ReadonlySet<number>;
  /** Tokens that end a row and mean end of sequence (EOS, end of turn); included in the output. */
  eosTokens?: ReadonlySet<number>;
  /** false: recompute the whole sequence every step (the reference the cache is tested against). */
  useCache?: boolean;
  /** Return each row's final cache (for the next turn). */
  keepCache?: boolean;
  returnLogits?: boolean;
  /** Pad id for batch padding (never attended to). */
  pad?: number;
}

export class GenerateError extends AgentR1Error {}

interface Active {
  index: number;
  row: GenerateRow;
  rng: Rng;
  out: GenerateResult;
  /** Next position to feed. */
  pos: number;
  /** Tokens fed so far (for the cache). */
  fed: number[];
  /** Valid keys in the current batch key layout. */
  valid: boolean[];
  limit: number;
}

export function generate(model: GPTModel, rows: readonly GenerateRow[], options: GenerateOptions = {}): GenerateResult[] {
  const C = model.config.contextLength;
  const pad = options.pad ?? 0;
  const results: GenerateResult[] = [];
  const active: Active[] = [];
  rows.forEach((row, index) => {
    if (row.tokens.length === 0) throw new GenerateError(`row ${index} has no tokens (a prompt is needed)`);
    if (!Number.isInteger(row.maxTokens) || row.maxTokens < 0) throw new GenerateError(`row ${index}: maxTokens must be an integer ≥ 0`);
    const out: GenerateResult = { tokens: [], logprobs: [], stop: 'length', prefilled: 0, ...(options.returnLogits ? { logits: [] } : {}) };
    results.push(out);
    // The last generated token is never fed, so a row may generate up to C - len + 1 tokens.
    const limit = Math.min(row.maxTokens, C - row.tokens.length + 1);
    if (limit <= 0 || row.tokens.length > C) {
      out.stop = row.maxTokens === 0 ? 'length' : 'context';
      return;
    }
    active.push({ index, row, rng: createRng(row.seed), out, pos: 0, fed: [], valid: [], limit });
  });
  if (active.length === 0) return results;
  if (options.useCache === false) {
    decodeUncached(model, active, options, pad);
    return results;
  }
  decodeCached(model, active, options, pad);
  return results;
}

function usableCache(row: GenerateRow): RowCache | undefined {
  const c = row.cache;
  if (!c || c.tokens.length === 0 || c.tokens.length >= row.tokens.length) return undefined;
  for (let i = 0; i < c.tokens.length; i++) if (c.tokens[i] !== row.tokens[i]) return undefined;
  return c;
}

function decodeCached(model: GPTModel, rowsIn: Active[], options: GenerateOptions, pad: number): void {
  const { nLayers: L } = model.config;
  let rows = rowsIn;
  // ---- prefill: each row feeds the tokens its cache lacks.
  const caches = rows.map((a) => usableCache(a.row));
  const cached = caches.map((c) => c?.tokens.length ?? 0);
  const fresh = rows.map((a, i) => a.row.tokens.slice(cached[i]));
  const P = Math.max(...cached);
  const N = Math.max(...fresh.map((f) => f.length));
  const B = rows.length;
  const ids = new Int32Array(B * N).fill(pad);
  const positions = new Int32Array(B * N);
  const maskData = new Float32Array(B * N * (P + N)).fill(MASK_VALUE);
  rows.forEach((a, b) => {
    ids.set(fresh[b]!, b * N);
    for (let i = 0; i < N; i++) {
      positions[b * N + i] = cached[b]! + Math.min(i, fresh[b]!.length - 1);
      const base = (b * N + i) * (P + N);
      for (let j = 0; j < cached[b]!; j++) maskData[base + j] = 0;
      for (let j = 0; j <= i; j++) maskData[base + P + j] = 0;
    }
    a.valid = [...Array(P).keys()].map((j) => j < cached[b]!).concat([...Array(N).keys()].map((j) => j < fresh[b]!.length));
    a.fed = a.row.tokens.slice();
    a.pos = a.row.tokens.length;
    a.out.prefilled = fresh[b]!.length;
  });
  let kv: LayerKV[];
  let last: Float32Array[];
  {
    const past =
      P === 0
        ? undefined
        : tf.tidy(() =>
            [...Array(L).keys()].map((l) => {
              const stack = (which: 'k' | 'v') =>
                tf.concat(
                  caches.map((c, b) => {
                    const t = c ? c.kv[l]![which] : null;
                    const len = cached[b]!;
                    const { nHeads: H, dModel: d } = model.config;
                    if (!t) return tf.zeros([1, H, P, d / H]);
                    return len === P ? t : t.pad([[0, 0], [0, 0], [0, P - len], [0, 0]]);
                  }),
                  0,
                ) as tf.Tensor4D;
              return { k: stack('k'), v: stack('v') };
            }),
          );
    const input = tf.tensor2d(ids, [B, N], 'int32');
    const pos = tf.tensor2d(positions, [B, N], 'int32');
    const mask = tf.tensor4d(maskData, [B, 1, N, P + N]);
    const res = model.forward(input, { positions: pos, past, mask, returnKV: true });
    kv = res.kv!;
    const rowsIdx = rows.map((_, b) => b * N + fresh[b]!.length - 1);
    last = pickRows(res.logits, rowsIdx);
    res.logits.dispose();
    res.values.dispose();
    for (const t of [input, pos, mask]) t.dispose();
    if (past) for (const p of past) tf.dispose([p.k, p.v]);
  }
  // ---- decode
  for (;;) {
    const next: number[] = [];
    const keep: number[] = [];
    rows.forEach((a, b) => {
      const token = sampleInto(a, last[b]!, options);
      if (finished(a, token, options)) {
        if (options.keepCache) a.out.cache = extractRow(kv, b, a.valid, a.fed);
      } else {
        keep.push(b);
        next.push(token);
      }
    });
    if (keep.length === 0) break;
    if (keep.length < rows.length) {
      const idx = tf.tensor1d(keep, 'int32');
      const compact = kv.map(({ k, v }) => ({ k: tf.gather(k, idx, 0) as tf.Tensor4D, v: tf.gather(v, idx, 0) as tf.Tensor4D }));
      idx.dispose();
      for (const p of kv) tf.dispose([p.k, p.v]);
      kv = compact;
      rows = keep.map((b) => rows[b]!);
    }
    const K = rows[0]!.valid.length;
    const stepMask = new Float32Array(rows.length * (K + 1));
    rows.forEach((a, b) => {
      for (let j = 0; j < K; j++) if (!a.valid[j]) stepMask[b * (K + 1) + j] = MASK_VALUE;
      a.valid.push(true);
    });
    const input = tf.tensor2d(Int32Array.from(next), [rows.length, 1], 'int32');
    const pos = tf.tensor2d(Int32Array.from(rows.map((a) => a.pos)), [rows.length, 1], 'int32');
    const mask = tf.tensor4d(stepMask, [rows.length, 1, 1, K + 1]);
    const res = model.forward(input, { positions: pos, past: kv, mask, returnKV: true });
    rows.forEach((a, b) => {
      a.fed.push(next[b]!);
      a.pos++;
    });
    for (const p of kv) tf.dispose([p.k, p.v]);
    kv = res.kv!;
    last = pickRows(res.logits, rows.map((_, b) => b));
    tf.dispose([res.logits, res.values, input, pos, mask]);
  }
  for (const p of kv) tf.dispose([p.k, p.v]);
}

function decodeUncached(model: GPTModel, rowsIn: Active[], options: GenerateOptions, pad: number): void {
  let rows = rowsIn;
  for (const a of rows) a.out.prefilled = a.row.tokens.length;
  for (;;) {
    const seqs = rows.map((a) => [...a.row.tokens, ...a.out.tokens]);
    const T = Math.max(...seqs.map((s) => s.length));
    const ids = new Int32Array(rows.length * T).fill(pad);
    seqs.forEach((s, b) => ids.set(s, b * T));
    const input = tf.tensor2d(ids, [rows.length, T], 'int32');
    const { logits, values } = model.forward(input);
    const last = pickRows(logits, seqs.map((s, b) => b * T + s.length - 1));
    tf.dispose([input, logits, values]);
    const keep: Active[] = [];
    rows.forEach((a, b) => {
      const token = sampleInto(a, last[b]!, options);
      if (!finished(a, token, options)) keep.push(a);
    });
    if (keep.length === 0) break;
    rows = keep;
  }
}

function pickRows(logits: tf.Tensor3D, flatRows: number[]): Float32Array[] {
  const [B, T, V] = logits.shape;
  const flat = logits.reshape([B * T, V]);
  const idx = tf.tensor1d(flatRows, 'int32');
  const picked = tf.gather(flat, idx);
  const data = picked.dataSync() as Float32Array;
  tf.dispose([flat, idx, picked]);
  return flatRows.map((_, i) => data.slice(i * V, (i + 1) * V));
}

function sampleInto(a: Active, logits: Float32Array, options: GenerateOptions): number {
  const { token, logprob } = sampleToken(logits, a.rng, options.sampling ?? {});
  a.out.tokens.push(token);
  a.out.logprobs.push(logprob);
  a.out.logits?.push(logits);
  return token;
}

function finished(a: Active, token: number, options: GenerateOptions): boolean {
  if (options.eosTokens?.has(token)) {
    a.out.stop = 'eos';
    return true;
  }
  if (options.stopTokens?.has(token)) {
    a.out.stop = 'stop';
    return true;
  }
  if (a.out.tokens.length >= a.limit) {
    a.out.stop = a.limit < a.row.maxTokens ? 'context' : 'length';
    return true;
  }
  return false;
}

function extractRow(kv: LayerKV[], b: number, valid: boolean[], fed: number[]): RowCache {
  const keep = valid.flatMap((ok, j) => (ok ? [j] : []));
  if (keep.length !== fed.length) throw new GenerateError(`internal: ${keep.length} valid keys for ${fed.length} fed tokens`);
  const idx = tf.tensor1d(keep, 'int32');
  const layers = kv.map(({ k, v }) =>
    tf.tidy(() => {
      const [, H, K, dh] = k.shape;
      const one = (t: tf.Tensor4D) => tf.gather(t.slice([b, 0, 0, 0], [1, H, K, dh]), idx, 2) as tf.Tensor4D;
      return { k: one(k), v: one(v) };
    }),
  );
  idx.dispose();
  const bytes = layers.reduce((n, l) => n + (l.k.size + l.v.size) * 4, 0);
  return { tokens: fed.slice(), kv: layers, bytes };
}

export function disposeCache(cache: RowCache | undefined): void {
  if (!cache) return;
  for (const l of cache.kv) tf.dispose([l.k, l.v]);
}

/**
 * Samples one token from logits with the row's stream. Returns the token and its log-probability
 * under the untempered distribution (what the trainer recomputes).
 */
export function sampleToken(logits: Float32Array, rng: Rng, sampling: SamplingOptions): { token: number; logprob: number } {
  const V = logits.length;
  let max = -Infinity;
  for (let i = 0; i < V; i++) if (logits[i]! > max) max = logits[i]!;
  let z = 0;
  for (let i = 0; i < V; i++) z += Math.exp(logits[i]! - max);
  const logZ = max + Math.log(z);
  const temperature = sampling.temperature ?? 1;
  let token: number;
  if (temperature <= 0) {
    token = 0;
    for (let i = 1; i < V; i++) if (logits[i]! > logits[token]!) token = i;
  } else {
    // Candidates in descending order of logit (ties by id, so the order is deterministic).
    let order = [...Array(V).keys()];
    const topK = sampling.topK && sampling.topK > 0 ? Math.min(sampling.topK, V) : V;
    const topP = sampling.topP ?? 1;
    if (topK < V || topP < 1) {
      order.sort((x, y) => logits[y]! - logits[x]! || x - y);
      order = order.slice(0, topK);
    }
    const w = order.map((i) => Math.exp((logits[i]! - max) / temperature));
    if (topP < 1) {
      const total = w.reduce((s, x) => s + x, 0);
      let acc = 0;
      let cut = w.length;
      for (let i = 0; i < w.length; i++) {
        acc += w[i]! / total;
        if (acc >= topP) {
          cut = i + 1;
          break;
        }
      }
      order = order.slice(0, cut);
      w.length = cut;
    }
    const total = w.reduce((s, x) => s + x, 0);
    let u = rng.next() * total;
    token = order[order.length - 1]!;
    for (let i = 0; i < order.length; i++) {
      u -= w[i]!;
      if (u < 0) {
        token = order[i]!;
        break;
      }
    }
  }
  return { token, logprob: logits[token]! - logZ };
}
