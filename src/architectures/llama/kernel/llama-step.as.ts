// AssemblyScript (compiled by bin/build-kernel.js into llama-kernel-wasm.ts; not TypeScript).
//
// One decode step of the Llama family (Llama 3.x, SmolLM2, Qwen2, Qwen3: ../definition.ts) over
// packed rows, in WebAssembly SIMD: embedding, every layer (RMSNorm, the fused q/k/v projection with
// its optional biases, Qwen3's per-head q/k RMSNorm, rotate-half rotary, append to each row's KV cache,
// grouped-query attention, output projection, RMSNorm, SwiGLU MLP), the final norm and the vocabulary
// head (the embedding when tied). The host (../decoder.ts) owns the memory: it writes the weights
// once per policy version in the checkpoint's own layout ([out][in], row-major), and each step's
// rows; calls `step` once; reads the logits back. The matrices (embedding, head, projections) are
// float32, or bfloat16 or IEEE half kept as such (F_BF16, F_F16: half the bytes a decode step
// streams), each value widened to float32 as it is loaded (exact: a bfloat16 is a float32's top half,
// a half a float32 with fewer bits), so a 16-bit model's logits are the same bits as its float32
// widening's. Norms, biases and rotary: float32.
//
// A row's numbers depend on that row alone, so its logits are the same bits in any batch: every
// output of a matmul is one dot product (four lanes over k ascending, summed (l0 + l1) + (l2 + l3),
// then the tail in order) whatever block of rows and columns it is computed in; every other
// reduction is within one row in an order fixed by the row's own sizes; no FMA.
//
// Threads: the memory is shared, and `threads` instances run `step` at once (the host's thread and
// workers the host parks until the next step), each on its share of every phase (a matmul's columns, the rows of a
// norm, the tokens of the rotary, the (token, head) pairs of attention), with a barrier between
// phases. Who computes an output never changes how: the bits are the same for any thread count.

import { colFrom, colTo, matmul, widen } from '../../kernel/matmul.as';
import { R_NEW, R_START, R_TOK, attendHeads, keysAt, rowAt, valuesAt } from '../../kernel/rows.as';
import { at, ceil8, expv, hsum, ptr, slot } from '../../kernel/simd.as';
import { barrier, first } from '../../kernel/threads.as';
export { weigh } from '../../kernel/simd.as';

// ---- the model table (i32 slots at `model`, written by the host) ----
const M_D: i32 = 0; // hidden size
const M_H: i32 = 1; // query heads
const M_HKV: i32 = 2; // key/value heads
const M_DH: i32 = 3; // head size
const M_L: i32 = 4;
const M_MLP: i32 = 5; // intermediate size
const M_V: i32 = 6;
const M_FLAGS: i32 = 7;
const M_EPS: i32 = 8; // rms_norm_eps, f32 bits
const M_EMBED: i32 = 9; // [V][d]
const M_HEAD: i32 = 10; // [V][d] (the embedding when tied)
const M_NORM: i32 = 11; // [d]
const M_COS: i32 = 12; // rotary [C][dh/2]
const M_SIN: i32 = 13;
const M_RANK: i32 = 14; // LoRA adapters' rank (0: none)
const M_LAYERS: i32 = 16;
const LAYER_SLOTS: i32 = 20;
// per layer: attn norm [d], wqkv [(H + 2Hkv)·dh][d], bqkv [(H + 2Hkv)·dh], wo [d][H·dh], bo [d],
// q norm [dh], k norm [dh], mlp norm [d], wgu (gate then up) [2M][d], bgu [2M], wd [d][M], bd [d]
const L_ATTN_NORM: i32 = 0;
const L_WQKV: i32 = 1;
const L_BQKV: i32 = 2;
const L_WO: i32 = 3;
const L_BO: i32 = 4;
const L_QNORM: i32 = 5;
const L_KNORM: i32 = 6;
const L_MLP_NORM: i32 = 7;
const L_WGU: i32 = 8;
const L_BGU: i32 = 9;
const L_WD: i32 = 10;
const L_BD: i32 = 11;
// With LoRA (rank r), per projection group its adapters, float32: A stacked [G·r][in] (q, k, v; gate,
// up), B stacked [out][r] already times alpha/r; a member without an adapter has zeros.
const L_A_QKV: i32 = 12;
const L_B_QKV: i32 = 13;
const L_A_O: i32 = 14;
const L_B_O: i32 = 15;
const L_A_GU: i32 = 16;
const L_B_GU: i32 = 17;
const L_A_D: i32 = 18;
const L_B_D: i32 = 19;

const F_QKV_BIAS: i32 = 1;
const F_O_BIAS: i32 = 2;
const F_MLP_BIAS: i32 = 4;
const F_QK_NORM: i32 = 8;
const F_BF16: i32 = 16; // the matrices are bfloat16
const F_F16: i32 = 32; // the matrices are IEEE half
// A part of a model split by layers (../decoder.ts): the residual stream comes in at the scratch's
// start instead of from the embedding, and goes out there instead of through the final norm and head.
const F_HIDDEN_IN: i32 = 64;
const F_HIDDEN_OUT: i32 = 128;

// Each row's cache (../../kernel/rows.as.ts): per layer K [cap][Hkv·dh] then V [cap][Hkv·dh]; then ids [cap].

// ---- row-wise pieces ----

/** y = x · (1/√(mean(x²) + ε)) · g over n columns (Transformers' LlamaRMSNorm, in float32). */
function rmsNorm(x: usize, y: usize, n: i32, g: usize, eps: f32): void {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const v = v128.load(at(x, i));
    acc = f32x4.add(acc, f32x4.mul(v, v));
  }
  let ss = hsum(acc);
  for (; i < n; i++) ss += load<f32>(at(x, i)) * load<f32>(at(x, i));
  const inv: f32 = <f32>1.0 / Mathf.sqrt(ss / <f32>n + eps);
  const iv = f32x4.splat(inv);
  i = 0;
  for (; i + 4 <= n; i += 4) v128.store(at(y, i), f32x4.mul(f32x4.mul(v128.load(at(x, i)), iv), v128.load(at(g, i))));
  for (; i < n; i++) store<f32>(at(y, i), load<f32>(at(x, i)) * inv * load<f32>(at(g, i)));
}

/**
 * Rotate-half rotary on one head of dh columns at x, position rows cs/sn ([dh/2]), then ·scale:
 * x[i]·cos − x[i + h]·sin and x[i + h]·cos + x[i]·sin for i < h = dh/2 (Transformers' rotate_half).
 */
function rotate(x: usize, dh: i32, cs: usize, sn: usize, scale: f32): void {
  const half = dh >> 1;
  for (let i = 0; i < half; i++) {
    const a = load<f32>(at(x, i));
    const b = load<f32>(at(x, i + half));
    const c = load<f32>(at(cs, i));
    const s = load<f32>(at(sn, i));
    store<f32>(at(x, i), (a * c + -b * s) * scale);
    store<f32>(at(x, i + half), (b * c + a * s) * scale);
  }
}

/** In place over the gate half of [gate | up] (each M wide): gate ← silu(gate) · up, silu(x) = x · σ(x). */
function swiglu(gu: usize, M: i32): void {
  let i = 0;
  const one = f32x4.splat(1.0);
  for (; i + 4 <= M; i += 4) {
    const g = v128.load(at(gu, i));
    const s = f32x4.div(g, f32x4.add(one, expv(f32x4.neg(g))));
    v128.store(at(gu, i), f32x4.mul(s, v128.load(at(gu, M + i))));
  }
  for (; i < M; i++) {
    const g = load<f32>(at(gu, i));
    const s = f32x4.extract_lane(f32x4.div(f32x4.splat(g), f32x4.add(one, expv(f32x4.splat(-g)))), 0);
    store<f32>(at(gu, i), s * load<f32>(at(gu, M + i)));
  }
}

// ---- LoRA: out += (x·Aᵀ)·B'ᵀ per group member, beside the base's product ----

/**
 * The low-rank half of a group's adapters, low [S][G·r] = x·Aᵀ, each thread computing all of it into
 * its own rows of scratch (a few columns against the base's thousands: cheaper than a barrier, and
 * a barrier here, in a call of its own, desynchronized the threads while V8 moved the kernel from its
 * baseline compiler to its optimizing one).
 */
function loraLow(x: usize, xs: i32, S: i32, K: i32, A: usize, G: i32, r: i32, t: i32): void {
  matmul<f32>(x, xs, S, K, A, 0, G * r, 0, lowOf(S, r, t), ceil8(3 * r), false, 0);
}

/** Thread t's [S][ceil8(3r)] rows of sLow. */
@inline function lowOf(S: i32, r: i32, t: i32): usize {
  return sLow + ((<usize>t * <usize>S * <usize>ceil8(3 * r)) << 2);
}

/**
 * out[s][n] += Σ_j low[s][g·r + j]·B[n][j] for the columns n0 ≤ n < n1 of this thread, member g's
 * columns being [ends[g − 1], ends[g]) (the members' outputs side by side, as the stacked base's).
 */
function loraAdd(S: i32, B: usize, r: i32, t: i32, n0: i32, n1: i32, out: usize, os: i32, e0: i32, e1: i32, e2: i32): void {
  const ls = ceil8(3 * r);
  const low = lowOf(S, r, t);
  let from = 0;
  for (let g = 0; g < 3; g++) {
    const to = g == 0 ? e0 : g == 1 ? e1 : e2;
    const a = max(from, n0);
    const b = min(to, n1);
    if (a < b) matmul<f32>(at(low, g * r), ls, S, r, B, a, b, 0, out, os, true, 0);
    from = to;
  }
}

// ---- scratch layout (one place: `scratchBytes` and `step` both use it) ----

let sX: usize = 0; // [S][ceil8(d)] residual stream
let sH: usize = 0; // [S][ceil8(d)] normed
let sQKV: usize = 0; // [S][ceil8((H + 2Hkv)·dh)]
let sCtx: usize = 0; // [S][ceil8(H·dh)]
let sMlp: usize = 0; // [S][ceil8(2M)]
let sLast: usize = 0; // [R][ceil8(d)]
let sScores: usize = 0; // [threads][C + 8]: each thread's attention scores
let sLow: usize = 0; // [threads][S][ceil8(3r)]: x·Aᵀ of a LoRA group, each thread's own
let sWide: usize = 0; // [threads][4·max(d, H·dh, M)]: a 16-bit matmul's 4 columns widened, each thread's own
let sEnd: usize = 0;

function carve(model: usize, base: usize, S: i32, R: i32, C: i32, T: i32): void {
  const d8 = <usize>ceil8(slot(model, M_D)) << 2;
  const dh = slot(model, M_DH);
  let p = base;
  sX = p; p += <usize>S * d8;
  sH = p; p += <usize>S * d8;
  sQKV = p; p += (<usize>S * <usize>ceil8((slot(model, M_H) + 2 * slot(model, M_HKV)) * dh)) << 2;
  sCtx = p; p += (<usize>S * <usize>ceil8(slot(model, M_H) * dh)) << 2;
  sMlp = p; p += (<usize>S * <usize>ceil8(2 * slot(model, M_MLP))) << 2;
  sLast = p; p += <usize>R * d8;
  sScores = p; p += (<usize>T * (<usize>C + 8)) << 2;
  sLow = p; p += (<usize>T * <usize>S * <usize>ceil8(3 * slot(model, M_RANK))) << 2;
  sWide = p; p += (<usize>T * <usize>wideFloats(model)) << 2;
  sEnd = p;
}

/** Floats of a thread's room to widen 4 columns of a 16-bit matmul: 4 × its longest k (0 for float32). */
function wideFloats(model: usize): i32 {
  if (!(slot(model, M_FLAGS) & (F_BF16 | F_F16))) return 0;
  return 4 * max(max(slot(model, M_D), slot(model, M_H) * slot(model, M_DH)), slot(model, M_MLP));
}

/** Bytes of scratch a step of S tokens over R rows needs (context C, T threads). */
export function scratchBytes(model: usize, S: i32, R: i32, C: i32, T: i32): i32 {
  carve(model, 0, S, R, C, T);
  return <i32>sEnd;
}

/**
 * One incremental forward over R rows with S new tokens in all (rows table at `rows`, token ids at
 * `tokens`): appends every new token's keys/values (and id) to its row's cache and writes each row's
 * next-token logits at `out`, [R][ceil8(V)]. Thread `t` of `T` does its share; all T call it.
 */
export function step(
  model: usize,
  rows: usize,
  R: i32,
  tokens: usize,
  S: i32,
  out: usize,
  scratch: usize,
  C: i32,
  t: i32,
  T: i32,
  sync: usize,
): void {
  const flags = slot(model, M_FLAGS);
  if (flags & F_BF16) stepOf<u16>(model, rows, R, tokens, S, out, scratch, C, t, T, sync);
  else if (flags & F_F16) stepOf<i16>(model, rows, R, tokens, S, out, scratch, C, t, T, sync);
  else stepOf<f32>(model, rows, R, tokens, S, out, scratch, C, t, T, sync);
}

/**
 * `step` with the matrices' element type W (f32, u16 for bfloat16, i16 for half): one instance of each. (A
 * single step branching on the dtype at each matmul gave other bits on two threads than on one
 * while V8 ran it on its baseline compiler, Liftoff; the cause was not found, and the float32
 * instance is the code that always gave the same bits.)
 */
function stepOf<W>(
  model: usize,
  rows: usize,
  R: i32,
  tokens: usize,
  S: i32,
  out: usize,
  scratch: usize,
  C: i32,
  t: i32,
  T: i32,
  sync: usize,
): void {
  carve(model, scratch, S, R, C, T);
  const d = slot(model, M_D);
  const H = slot(model, M_H);
  const Hkv = slot(model, M_HKV);
  const dh = slot(model, M_DH);
  const L = slot(model, M_L);
  const M = slot(model, M_MLP);
  const V = slot(model, M_V);
  const flags = slot(model, M_FLAGS);
  const eps = reinterpret<f32>(slot(model, M_EPS));
  const rank = slot(model, M_RANK);
  const d8 = ceil8(d);
  const qw = H * dh; // query width
  const kw = Hkv * dh; // key (and value) width: the cache's
  const qkv8 = ceil8(qw + 2 * kw);
  const ctx8 = ceil8(qw);
  const m8 = ceil8(2 * M);
  const group = H / Hkv;
  const half = dh >> 1;
  const cosT = ptr(model, M_COS);
  const sinT = ptr(model, M_SIN);
  const embed = ptr(model, M_EMBED);
  const kvBytes = <usize>kw << 2;
  const scores = at(sScores, t * (C + 8));
  const s0 = first(S, t, T);
  const s1 = first(S, t + 1, T);
  const wide = sizeof<W>() == 2 ? sWide + ((<usize>t * <usize>wideFloats(model)) << 2) : 0;

  let s = 0;
  if (!(flags & F_HIDDEN_IN)) {
    for (let r = 0; r < R; r++) {
      const row = rowAt(rows, r);
      const n = slot(row, R_NEW);
      const tok = at(tokens, slot(row, R_TOK));
      for (let j = 0; j < n; j++) {
        if (s + j < s0 || s + j >= s1) continue;
        const id = <usize>load<i32>(at(tok, j));
        if (sizeof<W>() == 2) widen<W>(embed + id * (<usize>d << 1), d, at(sX, (s + j) * d8));
        else memory.copy(at(sX, (s + j) * d8), embed + id * (<usize>d << 2), <usize>d << 2);
      }
      s += n;
    }
    barrier(sync, T);
  }

  const scale: f32 = <f32>1.0 / Mathf.sqrt(<f32>dh);
  const nQkv = qw + 2 * kw;
  for (let l = 0; l < L; l++) {
    const lp = at(model, M_LAYERS + l * LAYER_SLOTS);
    for (let i = s0; i < s1; i++) rmsNorm(at(sX, i * d8), at(sH, i * d8), d, ptr(lp, L_ATTN_NORM), eps);
    barrier(sync, T);
    if (rank) loraLow(sH, d8, S, d, ptr(lp, L_A_QKV), 3, rank, t);
    matmul<W>(sH, d8, S, d, ptr(lp, L_WQKV), colFrom(nQkv, t, T), colTo(nQkv, t, T), flags & F_QKV_BIAS ? ptr(lp, L_BQKV) : 0, sQKV, qkv8, false, wide);
    if (rank) loraAdd(S, ptr(lp, L_B_QKV), rank, t, colFrom(nQkv, t, T), colTo(nQkv, t, T), sQKV, qkv8, qw, qw + kw, nQkv);
    barrier(sync, T);
    // The rotary and the cache writes, a token at a time: this thread's tokens.
    s = 0;
    for (let r = 0; r < R; r++) {
      const row = rowAt(rows, r);
      const n = slot(row, R_NEW);
      const start = slot(row, R_START);
      const kc = keysAt(row, l, kw);
      const vc = valuesAt(row, kc, kw);
      for (let j = 0; j < n; j++) {
        if (s + j < s0 || s + j >= s1) continue;
        const q = at(sQKV, (s + j) * qkv8);
        const k = at(q, qw);
        const p = start + j;
        const cs = at(cosT, p * half);
        const sn = at(sinT, p * half);
        for (let h = 0; h < H; h++) {
          const qh = at(q, h * dh);
          if (flags & F_QK_NORM) rmsNorm(qh, qh, dh, ptr(lp, L_QNORM), eps);
          rotate(qh, dh, cs, sn, scale);
        }
        for (let g = 0; g < Hkv; g++) {
          const kh = at(k, g * dh);
          if (flags & F_QK_NORM) rmsNorm(kh, kh, dh, ptr(lp, L_KNORM), eps);
          rotate(kh, dh, cs, sn, 1.0);
        }
        memory.copy(kc + <usize>p * kvBytes, k, kvBytes);
        memory.copy(vc + <usize>p * kvBytes, at(k, kw), kvBytes);
      }
      s += n;
    }
    barrier(sync, T);
    // Attention: the (token, head) pairs in turn between the threads (later tokens read more keys).
    s = 0;
    let pair = 0;
    for (let r = 0; r < R; r++) {
      const row = rowAt(rows, r);
      const n = slot(row, R_NEW);
      const start = slot(row, R_START);
      const kc = keysAt(row, l, kw);
      const vc = valuesAt(row, kc, kw);
      for (let j = 0; j < n; j++) {
        const q = at(sQKV, (s + j) * qkv8);
        const ctx = at(sCtx, (s + j) * ctx8);
        pair = attendHeads(q, kc, vc, kw, H, group, dh, start + j + 1, scores, ctx, pair, t, T);
      }
      s += n;
    }
    barrier(sync, T);
    if (rank) loraLow(sCtx, ctx8, S, qw, ptr(lp, L_A_O), 1, rank, t);
    matmul<W>(sCtx, ctx8, S, qw, ptr(lp, L_WO), colFrom(d, t, T), colTo(d, t, T), flags & F_O_BIAS ? ptr(lp, L_BO) : 0, sX, d8, true, wide);
    if (rank) loraAdd(S, ptr(lp, L_B_O), rank, t, colFrom(d, t, T), colTo(d, t, T), sX, d8, d, d, d);
    barrier(sync, T);
    for (let i = s0; i < s1; i++) rmsNorm(at(sX, i * d8), at(sH, i * d8), d, ptr(lp, L_MLP_NORM), eps);
    barrier(sync, T);
    if (rank) loraLow(sH, d8, S, d, ptr(lp, L_A_GU), 2, rank, t);
    matmul<W>(sH, d8, S, d, ptr(lp, L_WGU), colFrom(2 * M, t, T), colTo(2 * M, t, T), flags & F_MLP_BIAS ? ptr(lp, L_BGU) : 0, sMlp, m8, false, wide);
    if (rank) loraAdd(S, ptr(lp, L_B_GU), rank, t, colFrom(2 * M, t, T), colTo(2 * M, t, T), sMlp, m8, M, 2 * M, 2 * M);
    barrier(sync, T);
    for (let i = s0; i < s1; i++) swiglu(at(sMlp, i * m8), M);
    barrier(sync, T);
    if (rank) loraLow(sMlp, m8, S, M, ptr(lp, L_A_D), 1, rank, t);
    matmul<W>(sMlp, m8, S, M, ptr(lp, L_WD), colFrom(d, t, T), colTo(d, t, T), flags & F_MLP_BIAS ? ptr(lp, L_BD) : 0, sX, d8, true, wide);
    if (rank) loraAdd(S, ptr(lp, L_B_D), rank, t, colFrom(d, t, T), colTo(d, t, T), sX, d8, d, d, d);
    barrier(sync, T);
  }
  if (flags & F_HIDDEN_OUT) return;

  // Each row's last new token: the final norm (and the row's ids into its cache), then the head.
  s = 0;
  const r0 = first(R, t, T);
  const r1 = first(R, t + 1, T);
  for (let r = 0; r < R; r++) {
    const row = rowAt(rows, r);
    const n = slot(row, R_NEW);
    if (r >= r0 && r < r1) {
      const start = slot(row, R_START);
      const ids = keysAt(row, L, kw);
      const tok = at(tokens, slot(row, R_TOK));
      for (let j = 0; j < n; j++) store<i32>(at(ids, start + j), load<i32>(at(tok, j)));
      rmsNorm(at(sX, (s + n - 1) * d8), at(sLast, r * d8), d, ptr(model, M_NORM), eps);
    }
    s += n;
  }
  barrier(sync, T);
  matmul<W>(sLast, d8, R, d, ptr(model, M_HEAD), colFrom(V, t, T), colTo(V, t, T), 0, out, ceil8(V), false, wide);
  barrier(sync, T);
}
