// AssemblyScript (compiled by bin/build-kernel.js into decode-kernel-wasm.ts; not TypeScript).
//
// One decode step of the GPT (model.ts) over packed rows, in WebAssembly SIMD: embeddings, every
// layer (layer norm, fused QKV matmul, rotary, append to each row's KV cache, attention, output
// projection, GELU MLP), the final norm, the tied vocabulary head and the copy head. The host
// (kernel-decoder.ts) owns the memory: it writes the weights once per policy version and each
// step's rows, calls `step` once, and reads the logits back.
//
// A row's numbers depend on that row alone, so its logits are the same bits in any batch: SIMD runs
// across output columns (a matmul's k sum is one lane's chain, k ascending, whatever block of rows
// the row falls in), every reduction (layer norm, dot products, softmax sums) is within one row in
// an order fixed by the row's own sizes, and there is no FMA (mul then add, each rounded).

import { R_NEW, R_PREV, R_START, R_TOK, attendHeads, keysAt, rowAt, valuesAt } from '../../kernel/rows.as';
import { at, ceil8, dot, expv, hsum, ptr, scores, sigmoidv, slot } from '../../kernel/simd.as';
export { weigh } from '../../kernel/simd.as';

// ---- the model table (i32 slots at `model`, written by the host) ----
const M_D: i32 = 0;
const M_H: i32 = 1;
const M_L: i32 = 2;
const M_MLP: i32 = 3;
const M_V: i32 = 4;
const M_FLAGS: i32 = 5;
const M_TOKEMB: i32 = 6; // [V][d] row-major (embedding lookups)
const M_HEAD: i32 = 7; // tokEmbᵀ packed [ceil8(V)/8][d][8]
const M_POS: i32 = 8; // learned positions [C][d]
const M_COS: i32 = 9; // rotary [C][d]
const M_SIN: i32 = 10;
const M_SHIFT: i32 = 11; // token shift gate [d]
const M_LNFG: i32 = 12;
const M_LNFB: i32 = 13;
const M_CWQ: i32 = 14; // copy head, packed [d][d]
const M_CWK: i32 = 15;
const M_CGATEW: i32 = 16; // [d]
const M_CGATEB: i32 = 17; // [1]
const M_LAYERS: i32 = 20;
const LAYER_SLOTS: i32 = 12;
// per layer: ln1g, ln1b, wqkv (packed [d][3d]), bqkv [ceil8(3d)], wo, bo, ln2g, ln2b, w1, b1, w2, b2

const F_ROPE: i32 = 1;
const F_SHIFT: i32 = 2;
const F_LEARNED: i32 = 4;
const F_COPY: i32 = 8;

// Each row's cache (../../kernel/rows.as.ts): per layer K [cap][d] then V [cap][d]; then, with a copy
// head, copy keys [cap][d]; then ids [cap].

const MODE_NONE: i32 = 0; // out = acc
const MODE_BIAS: i32 = 1; // out = acc + b
const MODE_RESID: i32 = 2; // out = out + (acc + b)
const MODE_GELU: i32 = 3; // out = gelu(acc + b)

const COPY_EPS: f32 = 1e-9;
const LN_EPS: f32 = 1e-5;

// ---- elementwise math (lane-wise, so every lane gives the same bits) ----

/** ln x for x > 0 (Cephes logf: mantissa in [√½, √2), degree-8 polynomial); ~1 ulp. */
@inline function logv(xin: v128): v128 {
  const bits = xin;
  let e = f32x4.convert_i32x4_s(i32x4.sub(i32x4.shr_u(bits, 23), i32x4.splat(126)));
  let m = v128.or(v128.and(bits, i32x4.splat(0x807fffff)), i32x4.splat(0x3f000000)); // [0.5, 1)
  const small = f32x4.lt(m, f32x4.splat(0.707106781186547524));
  e = f32x4.sub(e, v128.and(f32x4.splat(1.0), small));
  m = f32x4.add(f32x4.sub(m, f32x4.splat(1.0)), v128.and(m, small));
  const z = f32x4.mul(m, m);
  let y = f32x4.splat(7.0376836292e-2);
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(-1.151461031e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(1.167699874e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(-1.2420140846e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(1.4249322787e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(-1.6668057665e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(2.0000714765e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(-2.4999993993e-1));
  y = f32x4.add(f32x4.mul(y, m), f32x4.splat(3.3333331174e-1));
  y = f32x4.mul(f32x4.mul(y, m), z);
  y = f32x4.add(y, f32x4.mul(e, f32x4.splat(-2.12194440e-4)));
  y = f32x4.sub(y, f32x4.mul(z, f32x4.splat(0.5)));
  return f32x4.add(f32x4.add(m, y), f32x4.mul(e, f32x4.splat(0.693359375)));
}

/** x·σ(1.702x) (model.ts gelu). */
@inline function geluv(x: v128): v128 {
  return f32x4.mul(x, sigmoidv(f32x4.mul(x, f32x4.splat(1.702))));
}

// ---- matmul: out[s][n] = epilogue(Σ_k x[s][k]·W[k][n]) over panels of 8 columns ----

@inline function epilogue(out: usize, acc: v128, bias: usize, mode: i32): void {
  if (mode == MODE_NONE) {
    v128.store(out, acc);
  } else {
    const v = f32x4.add(acc, v128.load(bias));
    if (mode == MODE_BIAS) v128.store(out, v);
    else if (mode == MODE_RESID) v128.store(out, f32x4.add(v128.load(out), v));
    else v128.store(out, geluv(v));
  }
}

/**
 * x [S][xs] (K used), W packed as panels of 8 columns ([panels][K][8]), bias [panels·8], out
 * [S][os]. Rows go four at a time (4 × 8 accumulators), the rest one at a time; both do the same
 * lane arithmetic (acc = acc + x·w, k ascending), so a row's result does not depend on its block.
 */
function matmul(x: usize, xs: i32, S: i32, K: i32, w: usize, panels: i32, bias: usize, out: usize, os: i32, mode: i32): void {
  const panelBytes = <usize>K << 5;
  let s = 0;
  for (; s + 4 <= S; s += 4) {
    const x0 = at(x, s * xs);
    const x1 = x0 + (<usize>xs << 2);
    const x2 = x1 + (<usize>xs << 2);
    const x3 = x2 + (<usize>xs << 2);
    for (let p = 0; p < panels; p++) {
      let wp = w + <usize>p * panelBytes;
      let a00 = f32x4.splat(0), a01 = f32x4.splat(0), a10 = f32x4.splat(0), a11 = f32x4.splat(0);
      let a20 = f32x4.splat(0), a21 = f32x4.splat(0), a30 = f32x4.splat(0), a31 = f32x4.splat(0);
      let xo: usize = 0;
      const xe = <usize>K << 2;
      for (; xo < xe; xo += 4) {
        const b0 = v128.load(wp), b1 = v128.load(wp, 16);
        let c = v128.load32_splat(x0 + xo);
        a00 = f32x4.add(a00, f32x4.mul(c, b0)); a01 = f32x4.add(a01, f32x4.mul(c, b1));
        c = v128.load32_splat(x1 + xo);
        a10 = f32x4.add(a10, f32x4.mul(c, b0)); a11 = f32x4.add(a11, f32x4.mul(c, b1));
        c = v128.load32_splat(x2 + xo);
        a20 = f32x4.add(a20, f32x4.mul(c, b0)); a21 = f32x4.add(a21, f32x4.mul(c, b1));
        c = v128.load32_splat(x3 + xo);
        a30 = f32x4.add(a30, f32x4.mul(c, b0)); a31 = f32x4.add(a31, f32x4.mul(c, b1));
        wp += 32;
      }
      const bp = bias + (<usize>p << 5);
      const o0 = at(out, s * os + p * 8);
      const o1 = o0 + (<usize>os << 2);
      const o2 = o1 + (<usize>os << 2);
      const o3 = o2 + (<usize>os << 2);
      epilogue(o0, a00, bp, mode); epilogue(o0 + 16, a01, bp + 16, mode);
      epilogue(o1, a10, bp, mode); epilogue(o1 + 16, a11, bp + 16, mode);
      epilogue(o2, a20, bp, mode); epilogue(o2 + 16, a21, bp + 16, mode);
      epilogue(o3, a30, bp, mode); epilogue(o3 + 16, a31, bp + 16, mode);
    }
  }
  for (; s < S; s++) {
    const x0 = at(x, s * xs);
    for (let p = 0; p < panels; p++) {
      let wp = w + <usize>p * panelBytes;
      let a00 = f32x4.splat(0), a01 = f32x4.splat(0);
      for (let k = 0; k < K; k++) {
        const c = f32x4.splat(load<f32>(at(x0, k)));
        a00 = f32x4.add(a00, f32x4.mul(c, v128.load(wp)));
        a01 = f32x4.add(a01, f32x4.mul(c, v128.load(wp, 16)));
        wp += 32;
      }
      const bp = bias + (<usize>p << 5);
      const o0 = at(out, s * os + p * 8);
      epilogue(o0, a00, bp, mode);
      epilogue(o0 + 16, a01, bp + 16, mode);
    }
  }
}

// ---- row-wise pieces ----

/** y = (x − mean)·(1/√(var + ε))·g + b over the first d columns (model.ts layerNorm). */
function layerNorm(x: usize, y: usize, d: i32, g: usize, b: usize): void {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= d; i += 4) acc = f32x4.add(acc, v128.load(at(x, i)));
  let sum = hsum(acc);
  for (; i < d; i++) sum += load<f32>(at(x, i));
  const mean = sum / <f32>d;
  const mv = f32x4.splat(mean);
  acc = f32x4.splat(0);
  i = 0;
  for (; i + 4 <= d; i += 4) {
    const c = f32x4.sub(v128.load(at(x, i)), mv);
    acc = f32x4.add(acc, f32x4.mul(c, c));
  }
  let sq = hsum(acc);
  for (; i < d; i++) {
    const c = load<f32>(at(x, i)) - mean;
    sq += c * c;
  }
  const inv: f32 = <f32>1.0 / Mathf.sqrt(sq / <f32>d + LN_EPS);
  const iv = f32x4.splat(inv);
  i = 0;
  for (; i + 4 <= d; i += 4) {
    const c = f32x4.mul(f32x4.sub(v128.load(at(x, i)), mv), iv);
    v128.store(at(y, i), f32x4.add(f32x4.mul(c, v128.load(at(g, i))), v128.load(at(b, i))));
  }
  for (; i < d; i++) {
    store<f32>(at(y, i), (load<f32>(at(x, i)) - mean) * inv * load<f32>(at(g, i)) + load<f32>(at(b, i)));
  }
}

/**
 * Rotary positions on d columns at x, position row cs/sn ([d]): x·cos + rotate_half(x)·sin per
 * head (model.ts rotate), then ·scale.
 */
function rotate(x: usize, d: i32, dh: i32, cs: usize, sn: usize, scale: f32, tmp: usize): void {
  const half = dh >> 1;
  for (let h = 0; h < d; h += dh) {
    for (let i = 0; i < half; i++) {
      const a = load<f32>(at(x, h + i));
      const b = load<f32>(at(x, h + i + half));
      store<f32>(at(tmp, h + i), (a * load<f32>(at(cs, h + i)) + -b * load<f32>(at(sn, h + i))) * scale);
      store<f32>(at(tmp, h + i + half), (b * load<f32>(at(cs, h + i + half)) + a * load<f32>(at(sn, h + i + half))) * scale);
    }
  }
  memory.copy(x, tmp, <usize>d << 2);
}

@inline function scaleRow(x: usize, d: i32, scale: f32): void {
  for (let i = 0; i < d; i++) store<f32>(at(x, i), load<f32>(at(x, i)) * scale);
}

// ---- scratch layout (one place: `scratchBytes` and `step` both use it) ----

let sX: usize = 0; // [S][ceil8(d)] residual stream
let sH: usize = 0; // [S][ceil8(d)] layer-norm output
let sQKV: usize = 0; // [S][ceil8(3d)]
let sCtx: usize = 0; // [S][ceil8(d)]
let sMlp: usize = 0; // [S][ceil8(M)]
let sLast: usize = 0; // [R][ceil8(d)] final hidden state of each row's last token
let sCQ: usize = 0; // [R][ceil8(d)] copy queries
let sMix: usize = 0; // [ceil8(V)] copied probability per token id
let sScores: usize = 0; // [C + 8] attention scores of one query
let sTmp: usize = 0; // [ceil8(d)]
let sEnd: usize = 0;

function carve(model: usize, base: usize, S: i32, R: i32, C: i32): void {
  const d8 = <usize>ceil8(slot(model, M_D)) << 2;
  const V8 = <usize>ceil8(slot(model, M_V)) << 2;
  let p = base;
  sX = p; p += <usize>S * d8;
  sH = p; p += <usize>S * d8;
  sQKV = p; p += (<usize>S * <usize>ceil8(3 * slot(model, M_D))) << 2;
  sCtx = p; p += <usize>S * d8;
  sMlp = p; p += (<usize>S * <usize>ceil8(slot(model, M_MLP))) << 2;
  sLast = p; p += <usize>R * d8;
  sCQ = p; p += <usize>R * d8;
  sMix = p; p += V8;
  sScores = p; p += (<usize>C + 8) << 2;
  sTmp = p; p += d8;
  sEnd = p;
}

/** Bytes of scratch a step of S tokens over R rows needs (context C). */
export function scratchBytes(model: usize, S: i32, R: i32, C: i32): i32 {
  carve(model, 0, S, R, C);
  return <i32>sEnd;
}

/**
 * One incremental forward over R rows with S new tokens in all (rows table at `rows`, token ids at
 * `tokens`): appends every new token's keys/values (and copy keys, ids) to its row's cache and
 * writes each row's next-token logits (log-probabilities with a copy head) at `out`, [R][ceil8(V)].
 */
export function step(model: usize, rows: usize, R: i32, tokens: usize, S: i32, out: usize, scratch: usize, C: i32): void {
  const sLogits = out;
  carve(model, scratch, S, R, C);
  const d = slot(model, M_D);
  const H = slot(model, M_H);
  const L = slot(model, M_L);
  const M = slot(model, M_MLP);
  const V = slot(model, M_V);
  const flags = slot(model, M_FLAGS);
  const dh = d / H;
  const d8 = ceil8(d);
  const q8 = ceil8(3 * d);
  const m8 = ceil8(M);
  const V8 = ceil8(V);
  const tokEmb = ptr(model, M_TOKEMB);
  const cosT = ptr(model, M_COS);
  const sinT = ptr(model, M_SIN);
  const rowBytes = <usize>d << 2;

  // Embeddings: token (+ gate ⊙ previous token) (+ learned position).
  memory.fill(sX, 0, (<usize>S * <usize>d8) << 2);
  let s = 0;
  for (let r = 0; r < R; r++) {
    const row = rowAt(rows, r);
    const n = slot(row, R_NEW);
    const start = slot(row, R_START);
    const tok = at(tokens, slot(row, R_TOK));
    for (let j = 0; j < n; j++) {
      const x = at(sX, (s + j) * d8);
      const e = tokEmb + <usize>load<i32>(at(tok, j)) * rowBytes;
      memory.copy(x, e, rowBytes);
      if (flags & F_SHIFT) {
        const prev = j > 0 ? load<i32>(at(tok, j - 1)) : slot(row, R_PREV);
        if (prev >= 0) {
          const pe = tokEmb + <usize>prev * rowBytes;
          const g = ptr(model, M_SHIFT);
          for (let c = 0; c < d; c++) store<f32>(at(x, c), load<f32>(at(x, c)) + load<f32>(at(pe, c)) * load<f32>(at(g, c)));
        }
      }
      if (flags & F_LEARNED) {
        const pp = ptr(model, M_POS) + <usize>(start + j) * rowBytes;
        for (let c = 0; c < d; c++) store<f32>(at(x, c), load<f32>(at(x, c)) + load<f32>(at(pp, c)));
      }
    }
    s += n;
  }

  const scale: f32 = <f32>1.0 / Mathf.sqrt(<f32>dh);
  for (let l = 0; l < L; l++) {
    const lp = at(model, M_LAYERS + l * LAYER_SLOTS);
    for (let i = 0; i < S; i++) layerNorm(at(sX, i * d8), at(sH, i * d8), d, ptr(lp, 0), ptr(lp, 1));
    matmul(sH, d8, S, d, ptr(lp, 2), q8 >> 3, ptr(lp, 3), sQKV, q8, MODE_BIAS);
    s = 0;
    for (let r = 0; r < R; r++) {
      const row = rowAt(rows, r);
      const n = slot(row, R_NEW);
      const start = slot(row, R_START);
      const kc = keysAt(row, l, d);
      const vc = valuesAt(row, kc, d);
      for (let j = 0; j < n; j++) {
        const qkv = at(sQKV, (s + j) * q8);
        const p = start + j;
        if (flags & F_ROPE) {
          const cs = at(cosT, p * d);
          const sn = at(sinT, p * d);
          rotate(qkv, d, dh, cs, sn, scale, sTmp);
          rotate(qkv + rowBytes, d, dh, cs, sn, 1.0, sTmp);
        } else {
          scaleRow(qkv, d, scale);
        }
        memory.copy(kc + <usize>p * rowBytes, qkv + rowBytes, rowBytes);
        memory.copy(vc + <usize>p * rowBytes, qkv + 2 * rowBytes, rowBytes);
      }
      for (let j = 0; j < n; j++) {
        const qkv = at(sQKV, (s + j) * q8);
        const ctx = at(sCtx, (s + j) * d8);
        attendHeads(qkv, kc, vc, d, H, 1, dh, start + j + 1, sScores, ctx, 0, 0, 1);
      }
      s += n;
    }
    matmul(sCtx, d8, S, d, ptr(lp, 4), d8 >> 3, ptr(lp, 5), sX, d8, MODE_RESID);
    for (let i = 0; i < S; i++) layerNorm(at(sX, i * d8), at(sH, i * d8), d, ptr(lp, 6), ptr(lp, 7));
    matmul(sH, d8, S, d, ptr(lp, 8), m8 >> 3, ptr(lp, 9), sMlp, m8, MODE_GELU);
    matmul(sMlp, m8, S, M, ptr(lp, 10), d8 >> 3, ptr(lp, 11), sX, d8, MODE_RESID);
  }

  const copy = (flags & F_COPY) != 0;
  const lnfG = ptr(model, M_LNFG);
  const lnfB = ptr(model, M_LNFB);
  if (copy) {
    // Every new token's copy key (and id) goes into its row's cache.
    for (let i = 0; i < S; i++) layerNorm(at(sX, i * d8), at(sH, i * d8), d, lnfG, lnfB);
    matmul(sH, d8, S, d, ptr(model, M_CWK), d8 >> 3, 0, sCtx, d8, MODE_NONE);
  }
  s = 0;
  for (let r = 0; r < R; r++) {
    const row = rowAt(rows, r);
    const n = slot(row, R_NEW);
    const start = slot(row, R_START);
    const ck = keysAt(row, L, d);
    const ids = copy ? valuesAt(row, ck, d) : ck;
    const tok = at(tokens, slot(row, R_TOK));
    for (let j = 0; j < n; j++) {
      const p = start + j;
      store<i32>(at(ids, p), load<i32>(at(tok, j)));
      if (copy) {
        const k = at(sCtx, (s + j) * d8);
        if (flags & F_ROPE) rotate(k, d, dh, at(cosT, p * d), at(sinT, p * d), 1.0, sTmp);
        memory.copy(ck + <usize>p * rowBytes, k, rowBytes);
      }
    }
    const last = at(sLast, r * d8);
    if (copy) memory.copy(last, at(sH, (s + n - 1) * d8), <usize>d8 << 2);
    else layerNorm(at(sX, (s + n - 1) * d8), last, d, lnfG, lnfB);
    s += n;
  }
  matmul(sLast, d8, R, d, ptr(model, M_HEAD), V8 >> 3, 0, sLogits, V8, MODE_NONE);
  if (!copy) return;

  matmul(sLast, d8, R, d, ptr(model, M_CWQ), d8 >> 3, 0, sCQ, d8, MODE_NONE);
  const cscale: f32 = <f32>1.0 / Mathf.sqrt(<f32>d);
  const gw = ptr(model, M_CGATEW);
  const gb = load<f32>(ptr(model, M_CGATEB));
  for (let r = 0; r < R; r++) {
    const row = rowAt(rows, r);
    const n = slot(row, R_START) + slot(row, R_NEW);
    const ck = keysAt(row, L, d);
    const ids = valuesAt(row, ck, d);
    const q = at(sCQ, r * d8);
    if (flags & F_ROPE) rotate(q, d, dh, at(cosT, (n - 1) * d), at(sinT, (n - 1) * d), cscale, sTmp);
    else scaleRow(q, d, cscale);
    const gate = f32x4.extract_lane(sigmoidv(f32x4.splat(dot(at(sLast, r * d8), gw, d) + gb)), 0);
    copyMix(at(sLogits, r * V8), V, q, ck, ids, d, n, gate);
  }
}

/**
 * The copy head's mixture for one row (model.ts predict): gate·softmax(logits) + (1 − gate)·copied,
 * where copied puts the copy attention's weight on each cached position onto the id found there;
 * written over `logits` as log(mixture + COPY_EPS).
 */
function copyMix(logits: usize, V: i32, q: usize, ck: usize, ids: usize, d: i32, n: i32, gate: f32): void {
  const V4 = (V + 3) & ~3;
  // Padding columns of the head are 0; they must not count in the softmax.
  for (let i = V; i < V4; i++) store<f32>(at(logits, i), -Infinity);
  let mv = f32x4.splat(-Infinity);
  for (let i = 0; i < V4; i += 4) mv = f32x4.max(mv, v128.load(at(logits, i)));
  const max = Mathf.max(
    Mathf.max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
    Mathf.max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
  );
  const maxv = f32x4.splat(max);
  let zv = f32x4.splat(0);
  for (let i = 0; i < V4; i += 4) {
    const e = expv(f32x4.sub(v128.load(at(logits, i)), maxv));
    v128.store(at(logits, i), e);
    zv = f32x4.add(zv, e);
  }
  const z = f32x4.splat(hsum(zv));
  memory.fill(sMix, 0, <usize>V4 << 2);
  const smax = scores(q, ck, d, d, n, sScores);
  let sz: f32 = 0;
  for (let t = 0; t < n; t += 4) {
    const e = expv(f32x4.sub(v128.load(at(sScores, t)), f32x4.splat(smax)));
    v128.store(at(sScores, t), e);
  }
  for (let t = 0; t < n; t++) sz += load<f32>(at(sScores, t));
  for (let t = 0; t < n; t++) {
    const id = load<i32>(at(ids, t));
    store<f32>(at(sMix, id), load<f32>(at(sMix, id)) + load<f32>(at(sScores, t)) / sz);
  }
  const g = f32x4.splat(gate);
  const ng = f32x4.splat(<f32>1.0 - gate);
  const eps = f32x4.splat(COPY_EPS);
  for (let i = 0; i < V4; i += 4) {
    const p = f32x4.add(f32x4.mul(f32x4.div(v128.load(at(logits, i)), z), g), f32x4.mul(v128.load(at(sMix, i)), ng));
    v128.store(at(logits, i), logv(f32x4.add(p, eps)));
  }
}
