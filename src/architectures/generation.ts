import { createRng, type Rng } from '../core/rng.ts';
import { AgentR1Error } from '../core/errors.ts';
import type { KernelHost, KernelSession } from './kernel/kernel-host.ts';
import type { KVCache } from './kv-cache.ts';

/**
 * Batched incremental decoding with a KV cache on a decode kernel, for any architecture's kernel
 * (the GPT's, the Llama family's): every row prefills only the tokens its cache does not hold, then
 * all rows decode one token per step, one kernel call per step for the whole model over the packed
 * rows. A row's logits are the same bits alone or in any batch, and each row samples from its own
 * PRNG stream (seeded by the row's seed), so what a row generates does not depend on the batch.
 * Finished rows leave the batch.
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
  /** Keys/values per layer (plain JS memory: dropping it frees it). */
  kv: KVCache;
  bytes: number;
}

/** One row of a batched generation. */
export interface GenerateRequest {
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

/** What every decoder is told (the GPT's tfjs path takes more: src/policy/tfjs/generate.ts). */
export interface GenerationOptions {
  sampling?: SamplingOptions;
  /** Tokens that end a row: included in the output (`</tool_call>`, `</answer>`). */
  stopTokens?: ReadonlySet<number>;
  /** Tokens that end a row and mean end of sequence (EOS, end of turn); included in the output. */
  eosTokens?: ReadonlySet<number>;
  /** Return each row's final cache (for the next turn). */
  keepCache?: boolean;
  returnLogits?: boolean;
}

export class GenerateError extends AgentR1Error {}

/** A row being generated. */
export interface ActiveRow {
  index: number;
  row: GenerateRequest;
  rng: Rng;
  out: GenerateResult;
  /** Tokens fed so far (for the cache). */
  fed: number[];
  /** The row's keys/values so far (a copy of the caller's cache, so the caller's stays valid). */
  kv?: KVCache;
  limit: number;
}

/**
 * Checks the rows and sets up their results: rows that cannot generate (no room left in a context of
 * C positions, or maxTokens 0) are finished at once; the rest are returned to decode.
 */
export function startRows(
  rows: readonly GenerateRequest[],
  C: number,
  options: GenerationOptions,
): { results: GenerateResult[]; active: ActiveRow[] } {
  const results: GenerateResult[] = [];
  const active: ActiveRow[] = [];
  rows.forEach((row, index) => {
    if (row.tokens.length === 0) throw new GenerateError(`row ${index} has no tokens (a prompt is needed)`);
    if (!Number.isInteger(row.maxTokens) || row.maxTokens < 0)
      throw new GenerateError(`row ${index}: maxTokens must be an integer ≥ 0`);
    const out: GenerateResult = {
      tokens: [],
      logprobs: [],
      stop: 'length',
      prefilled: 0,
      ...(options.returnLogits ? { logits: [] } : {}),
    };
    results.push(out);
    // The last generated token is never fed, so a row may generate up to C - len + 1 tokens.
    const limit = Math.min(row.maxTokens, C - row.tokens.length + 1);
    if (limit <= 0 || row.tokens.length > C) {
      out.stop = row.maxTokens === 0 ? 'length' : 'context';
      return;
    }
    active.push({ index, row, rng: createRng(row.seed), out, fed: [], limit });
  });
  return { results, active };
}

/** Generates for every row on a decode kernel (which `prepare` makes current with its model's weights). */
export async function generateOnKernel(
  kernel: KernelHost & { prepare(): Promise<void> },
  rows: readonly GenerateRequest[],
  options: GenerationOptions = {},
): Promise<GenerateResult[]> {
  const { results, active } = startRows(rows, kernel.shape.contextLength, options);
  if (active.length === 0) return results;
  await kernel.prepare();
  // No await from here to the end: the session owns the kernel's memory until it closes.
  decodeOnKernel(kernel, active, options);
  return results;
}

/**
 * The part of a row's cache that its tokens begin with: all of it when the cache's tokens are a
 * prefix of the row's (the next turn of a concatenating episode), else the keys and values of the
 * tokens the two share (a step-level context that rewrote what follows the opening prompt: only
 * the rest is prefilled). Keys and values at a position depend on the tokens up to it alone, so
 * the logits are those of a prefill from scratch.
 */
export function usableCache(row: GenerateRequest): RowCache | undefined {
  const c = row.cache;
  if (!c || c.tokens.length === 0) return undefined;
  const limit = Math.min(c.tokens.length, row.tokens.length - 1); // one token at least must be fed
  let shared = 0;
  while (shared < limit && c.tokens[shared] === row.tokens[shared]) shared++;
  if (shared === c.tokens.length) return c;
  if (shared < MIN_SHARED_PREFIX) return undefined;
  const kv = c.kv.prefix(shared);
  return { tokens: c.tokens.slice(0, shared), kv, bytes: kv.bytes };
}

/** Fewer shared tokens than this are prefilled again rather than copied out of a cache. */
export const MIN_SHARED_PREFIX = 16;

/** decodeCached on the decode kernel: the rows' caches live in its memory for the whole call. */
function decodeOnKernel(decoder: KernelHost, rows: ActiveRow[], options: GenerationOptions): void {
  const caches = rows.map((a) => usableCache(a.row));
  const session = decoder.session(
    rows.map((a, i) => ({ cache: caches[i]?.kv, capacity: a.row.tokens.length + a.limit })),
  );
  const sampling = options.sampling ?? {};
  const V = decoder.shape.vocabSize;
  const temperature = sampling.temperature ?? 1;
  // Top-k / top-p sort the vocabulary: sampleToken does it; otherwise the kernel computes the weights.
  const filtered = (sampling.topK !== undefined && sampling.topK > 0 && sampling.topK < V) || (sampling.topP ?? 1) < 1;
  try {
    let steps = rows.map((a, slot) => {
      a.fed = a.row.tokens.slice();
      const from = caches[slot]?.tokens.length ?? 0;
      a.out.prefilled = a.row.tokens.length - from;
      return {
        slot,
        tokens: a.row.tokens.slice(from),
        ...(from > 0 ? { prevToken: a.row.tokens[from - 1]! } : {}),
      };
    });
    let live = rows;
    while (live.length > 0) {
      const logits = session.step(steps);
      const drawn = filtered
        ? live.map((a, i) => sampleToken(logits[i]!, a.rng, sampling))
        : drawWeighted(session, logits, live, temperature);
      const next: ActiveRow[] = [];
      const nextSteps: typeof steps = [];
      live.forEach((a, i) => {
        const { token, logprob } = drawn[i]!;
        a.out.tokens.push(token);
        a.out.logprobs.push(logprob);
        a.out.logits?.push(logits[i]!.slice());
        const slot = steps[i]!.slot;
        if (finished(a, token, options)) {
          if (options.keepCache) {
            const kv = session.exportCache(slot);
            a.out.cache = { tokens: a.fed.slice(), kv, bytes: kv.bytes };
          }
        } else {
          nextSteps.push({ slot, tokens: [token], prevToken: a.fed[a.fed.length - 1]! });
          a.fed.push(token);
          next.push(a);
        }
      });
      live = next;
      steps = nextSteps;
    }
  } finally {
    session.close();
  }
}

/**
 * sampleToken's rule (no top-k / top-p) on the kernel's weights: w = exp(logit − max) give the
 * normalizer (summed in order, in float64) and, at temperature 1, the draw; another temperature
 * draws from exp((logit − max) / T); temperature ≤ 0 takes the argmax.
 */
function drawWeighted(
  session: KernelSession,
  logits: Float32Array[],
  live: readonly ActiveRow[],
  temperature: number,
): Array<{ token: number; logprob: number }> {
  const ones = session.weights(1);
  const z = new Float64Array(live.length);
  const logZ = live.map((_, i) => {
    const l = logits[i]!;
    const w = ones[i]!;
    let max = -Infinity;
    let sum = 0;
    for (let j = 0; j < l.length; j++) {
      if (l[j]! > max) max = l[j]!;
      sum += w[j]!;
    }
    z[i] = sum;
    return max + Math.log(sum);
  });
  const tempered = temperature > 0 && temperature !== 1;
  const weights = tempered ? session.weights(temperature) : ones;
  return live.map((a, i) => {
    const l = logits[i]!;
    let token = 0;
    if (temperature <= 0) {
      for (let j = 1; j < l.length; j++) if (l[j]! > l[token]!) token = j;
    } else {
      const w = weights[i]!;
      let total = z[i]!;
      if (tempered) {
        total = 0;
        for (let j = 0; j < w.length; j++) total += w[j]!;
      }
      let u = a.rng.next() * total;
      token = w.length - 1;
      for (let j = 0; j < w.length; j++) {
        u -= w[j]!;
        if (u < 0) {
          token = j;
          break;
        }
      }
    }
    return { token, logprob: l[token]! - logZ[i]! };
  });
}

export function sampleInto(a: ActiveRow, logits: Float32Array, options: GenerationOptions): number {
  const { token, logprob } = sampleToken(logits, a.rng, options.sampling ?? {});
  a.out.tokens.push(token);
  a.out.logprobs.push(logprob);
  a.out.logits?.push(logits);
  return token;
}

export function finished(a: ActiveRow, token: number, options: GenerationOptions): boolean {
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

/**
 * Samples one token from logits with the row's stream. Returns the token and its log-probability
 * under the untempered distribution (what the trainer recomputes).
 */
export function sampleToken(
  logits: Float32Array,
  rng: Rng,
  sampling: SamplingOptions,
): { token: number; logprob: number } {
  const V = logits.length;
  let max = -Infinity;
  for (let i = 0; i < V; i++) if (logits[i]! > max) max = logits[i]!;
  const temperature = sampling.temperature ?? 1;
  const topK = sampling.topK && sampling.topK > 0 ? Math.min(sampling.topK, V) : V;
  const topP = sampling.topP ?? 1;
  // At temperature 1 over the whole vocabulary the draw's weights are the normalizer's terms:
  // computed once (the same numbers, summed in the same order, as the general path below).
  const plain = temperature === 1 && topK === V && topP >= 1;
  const e = plain ? weightsBuffer(V) : null;
  let z = 0;
  for (let i = 0; i < V; i++) {
    const x = Math.exp(logits[i]! - max);
    if (e) e[i] = x;
    z += x;
  }
  const logZ = max + Math.log(z);
  let token: number;
  if (temperature <= 0) {
    token = 0;
    for (let i = 1; i < V; i++) if (logits[i]! > logits[token]!) token = i;
  } else if (e) {
    let u = rng.next() * z;
    token = V - 1;
    for (let i = 0; i < V; i++) {
      u -= e[i]!;
      if (u < 0) {
        token = i;
        break;
      }
    }
  } else {
    // Candidates in descending order of logit (ties by id, so the order is deterministic).
    let order = [...Array(V).keys()];
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

let weights = new Float64Array(0);
/** A reused buffer for sampleToken's weights (sampling is synchronous: one user at a time). */
function weightsBuffer(n: number): Float64Array {
  if (weights.length < n) weights = new Float64Array(n);
  return weights;
}
