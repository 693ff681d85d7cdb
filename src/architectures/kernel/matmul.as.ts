// AssemblyScript (not TypeScript): the matmul the Llama family's kernels share (the decode step,
// ../llama/kernel/llama-step.as.ts, and the frozen base's linear maps, ./linear.as.ts):
// out[s][n] = (out[s][n] +) Σ_k x[s][k]·w[n][k] (+ b[n]), w row-major [N][K].
//
// Every output is one dot product (four lanes over k ascending, summed (l0 + l1) + (l2 + l3), then
// the tail in order) whatever block of rows and columns it is computed in, with no FMA: a row's
// result does not depend on its block, its batch or the thread that computes it.

import { at, hsum } from './simd.as';
import { first } from './threads.as';

// W is the weights' element type: f32, u16 for bfloat16, or i16 standing for IEEE half (each
// instance compiled on its own, the tests on W folded away).

/**
 * Halves (in the low 16 bits of each lane) as float32, exactly: the exponent and mantissa moved to
 * float32's places and scaled by 2^112 (the two biases' difference; a subnormal half becomes a
 * normal float32, exactly), the sign put back; infinities and NaNs get float32's all-ones exponent.
 */
@inline function halves(h: v128): v128 {
  const em = i32x4.shl(v128.and(h, i32x4.splat(0x7fff)), 13);
  const scaled = f32x4.mul(em, f32x4.splat(reinterpret<f32>(<u32>0x77800000)));
  const special = i32x4.eq(v128.and(h, i32x4.splat(0x7c00)), i32x4.splat(0x7c00));
  const value = v128.bitselect(v128.or(em, i32x4.splat(0x7f800000)), scaled, special);
  return v128.or(value, i32x4.shl(v128.and(h, i32x4.splat(0x8000)), 16));
}

/** Four weights from k on, as float32 lanes (bfloat16: the 16 bits moved to the top). */
@inline function wv<W>(w: usize, k: i32): v128 {
  if (isSigned<W>() && sizeof<W>() == 2) return halves(v128.load16x4_u(w + (<usize>k << 1)));
  if (sizeof<W>() == 2) return i32x4.shl(v128.load16x4_u(w + (<usize>k << 1)), 16);
  return v128.load(w + (<usize>k << 2));
}
/**
 * Weights k..k+3 (hi false) or k+4..k+7 as float32 lanes, as wv gives them; bfloat16 from one 16-byte
 * load whose halves are interleaved with zeros (half the loads, no shifts: a one-row decode, which
 * has little else to do, ran faster). Not in the 4-row blocks: the zeros' register made V8 spill an
 * accumulator there.
 */
@inline function wv8<W>(w: usize, k: i32, hi: bool): v128 {
  if (isSigned<W>() || sizeof<W>() != 2) return wv<W>(w, hi ? k + 4 : k);
  const v = v128.load(w + (<usize>k << 1));
  return hi
    ? i8x16.shuffle(i32x4.splat(0), v, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31)
    : i8x16.shuffle(i32x4.splat(0), v, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
}

/** One weight as float32. */
@inline function ws<W>(w: usize, k: i32): f32 {
  if (isSigned<W>() && sizeof<W>() == 2)
    return f32x4.extract_lane(halves(i32x4.splat(<i32>load<u16>(w + (<usize>k << 1)))), 0);
  if (sizeof<W>() == 2) return reinterpret<f32>(<u32>load<u16>(w + (<usize>k << 1)) << 16);
  return load<f32>(w + (<usize>k << 2));
}

/** A dot product's chain finished: its lanes summed, then the tail of k (past the last multiple of 4) in order. */
@inline function finish<W>(acc: v128, x: usize, w: usize, K4: i32, K: i32): f32 {
  let s = hsum(acc);
  for (let k = K4; k < K; k++) s += load<f32>(at(x, k)) * ws<W>(w, k);
  return s;
}

@inline function emit(out: usize, v: f32, bias: usize, n: i32, resid: bool): void {
  const y = bias ? v + load<f32>(at(bias, n)) : v;
  store<f32>(out, resid ? load<f32>(out) + y : y);
}

/** Rows of x a chunk takes: a chunk's rows (K floats each, ≤ 768 KB) stay in a core's L2 while its columns' weights stream past once. */
@inline function chunkRows(K: i32): i32 {
  const r = (196608 / K) & ~3;
  return r < 4 ? 4 : r > 64 ? 64 : r;
}

/** Rows s..s+3 against columns n, n+1 (8 chains at once): x at x0 (rows xRow bytes apart), out at o0 (os floats apart). */
@inline function block4x2<W>(x0: usize, xRow: usize, o0: usize, os: i32, w0: usize, w1: usize, n: i32, K4: i32, K: i32, bias: usize, resid: bool): void {
  const x1 = x0 + xRow;
  const x2 = x1 + xRow;
  const x3 = x2 + xRow;
  let a00 = f32x4.splat(0), a01 = f32x4.splat(0), a10 = f32x4.splat(0), a11 = f32x4.splat(0);
  let a20 = f32x4.splat(0), a21 = f32x4.splat(0), a30 = f32x4.splat(0), a31 = f32x4.splat(0);
  for (let k = 0; k < K4; k += 4) {
    const o = <usize>k << 2;
    const b0 = wv<W>(w0, k), b1 = wv<W>(w1, k);
    let c = v128.load(x0 + o);
    a00 = f32x4.add(a00, f32x4.mul(c, b0)); a01 = f32x4.add(a01, f32x4.mul(c, b1));
    c = v128.load(x1 + o);
    a10 = f32x4.add(a10, f32x4.mul(c, b0)); a11 = f32x4.add(a11, f32x4.mul(c, b1));
    c = v128.load(x2 + o);
    a20 = f32x4.add(a20, f32x4.mul(c, b0)); a21 = f32x4.add(a21, f32x4.mul(c, b1));
    c = v128.load(x3 + o);
    a30 = f32x4.add(a30, f32x4.mul(c, b0)); a31 = f32x4.add(a31, f32x4.mul(c, b1));
  }
  const o1 = at(o0, os);
  const o2 = at(o1, os);
  const o3 = at(o2, os);
  emit(at(o0, n), finish<W>(a00, x0, w0, K4, K), bias, n, resid);
  emit(at(o0, n + 1), finish<W>(a01, x0, w1, K4, K), bias, n + 1, resid);
  emit(at(o1, n), finish<W>(a10, x1, w0, K4, K), bias, n, resid);
  emit(at(o1, n + 1), finish<W>(a11, x1, w1, K4, K), bias, n + 1, resid);
  emit(at(o2, n), finish<W>(a20, x2, w0, K4, K), bias, n, resid);
  emit(at(o2, n + 1), finish<W>(a21, x2, w1, K4, K), bias, n + 1, resid);
  emit(at(o3, n), finish<W>(a30, x3, w0, K4, K), bias, n, resid);
  emit(at(o3, n + 1), finish<W>(a31, x3, w1, K4, K), bias, n + 1, resid);
}

/** Rows s..s+3 against column n. */
@inline function block4x1<W>(x0: usize, xRow: usize, o0: usize, os: i32, w0: usize, n: i32, K4: i32, K: i32, bias: usize, resid: bool): void {
  const x1 = x0 + xRow;
  const x2 = x1 + xRow;
  const x3 = x2 + xRow;
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let k = 0; k < K4; k += 4) {
    const o = <usize>k << 2;
    const b0 = wv<W>(w0, k);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x0 + o), b0));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(x1 + o), b0));
    a2 = f32x4.add(a2, f32x4.mul(v128.load(x2 + o), b0));
    a3 = f32x4.add(a3, f32x4.mul(v128.load(x3 + o), b0));
  }
  const o1 = at(o0, os);
  const o2 = at(o1, os);
  const o3 = at(o2, os);
  emit(at(o0, n), finish<W>(a0, x0, w0, K4, K), bias, n, resid);
  emit(at(o1, n), finish<W>(a1, x1, w0, K4, K), bias, n, resid);
  emit(at(o2, n), finish<W>(a2, x2, w0, K4, K), bias, n, resid);
  emit(at(o3, n), finish<W>(a3, x3, w0, K4, K), bias, n, resid);
}

/** One row against columns n..n+3 (a decode step of one row streams the weights once). */
@inline function block1x4<W>(x0: usize, o0: usize, w0: usize, wRow: usize, n: i32, K4: i32, K: i32, bias: usize, resid: bool): void {
  const w1 = w0 + wRow;
  const w2 = w1 + wRow;
  const w3 = w2 + wRow;
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let k = 0;
  // bfloat16: eight k at a time, each chain still adding k..k+3 then k+4..k+7 (the same sums as four
  // at a time). Not float32: unrolled, its one-row decode ran slower.
  if (!isSigned<W>() && sizeof<W>() == 2) for (; k + 8 <= K4; k += 8) {
    const c = v128.load(x0 + (<usize>k << 2));
    const d = v128.load(x0 + (<usize>k << 2), 16);
    a0 = f32x4.add(f32x4.add(a0, f32x4.mul(c, wv8<W>(w0, k, false))), f32x4.mul(d, wv8<W>(w0, k, true)));
    a1 = f32x4.add(f32x4.add(a1, f32x4.mul(c, wv8<W>(w1, k, false))), f32x4.mul(d, wv8<W>(w1, k, true)));
    a2 = f32x4.add(f32x4.add(a2, f32x4.mul(c, wv8<W>(w2, k, false))), f32x4.mul(d, wv8<W>(w2, k, true)));
    a3 = f32x4.add(f32x4.add(a3, f32x4.mul(c, wv8<W>(w3, k, false))), f32x4.mul(d, wv8<W>(w3, k, true)));
  }
  for (; k < K4; k += 4) {
    const c = v128.load(x0 + (<usize>k << 2));
    a0 = f32x4.add(a0, f32x4.mul(c, wv<W>(w0, k)));
    a1 = f32x4.add(a1, f32x4.mul(c, wv<W>(w1, k)));
    a2 = f32x4.add(a2, f32x4.mul(c, wv<W>(w2, k)));
    a3 = f32x4.add(a3, f32x4.mul(c, wv<W>(w3, k)));
  }
  emit(at(o0, n), finish<W>(a0, x0, w0, K4, K), bias, n, resid);
  emit(at(o0, n + 1), finish<W>(a1, x0, w1, K4, K), bias, n + 1, resid);
  emit(at(o0, n + 2), finish<W>(a2, x0, w2, K4, K), bias, n + 2, resid);
  emit(at(o0, n + 3), finish<W>(a3, x0, w3, K4, K), bias, n + 3, resid);
}

/** One row against column n. */
@inline function block1x1<W>(x0: usize, o0: usize, w0: usize, n: i32, K4: i32, K: i32, bias: usize, resid: bool): void {
  let a0 = f32x4.splat(0);
  for (let k = 0; k < K4; k += 4) a0 = f32x4.add(a0, f32x4.mul(v128.load(x0 + (<usize>k << 2)), wv<W>(w0, k)));
  emit(at(o0, n), finish<W>(a0, x0, w0, K4, K), bias, n, resid);
}

/**
 * Columns n..n+3 (weights from w0, wRow bytes apart) against the chunk's rows s0..s1: blocks of 4 rows
 * × 2 columns for rows s0..s4, then 1 row × 4 columns.
 */
@inline function columns4<W>(x: usize, xs: i32, s0: i32, s4: i32, s1: i32, out: usize, os: i32, w0: usize, wRow: usize, n: i32, K4: i32, K: i32, bias: usize, resid: bool): void {
  const xRow = <usize>xs << 2;
  const w2 = w0 + 2 * wRow;
  for (let s = s0; s < s4; s += 4) {
    block4x2<W>(at(x, s * xs), xRow, at(out, s * os), os, w0, w0 + wRow, n, K4, K, bias, resid);
    block4x2<W>(at(x, s * xs), xRow, at(out, s * os), os, w2, w2 + wRow, n + 2, K4, K, bias, resid);
  }
  for (let s = s4; s < s1; s++) block1x4<W>(at(x, s * xs), at(out, s * os), w0, wRow, n, K4, K, bias, resid);
}

/**
 * x [S][xs] (K used), w [N][K], bias [N] or 0, out [S][os]; the columns n0 ≤ n < N. The rows go in
 * chunks that stay in cache; each chunk meets every column once, four at a time, in blocks of 4 rows ×
 * 2 columns (8 chains at once), the chunk's last rows 1 row × 4 columns. So a batch of decode rows, or a
 * prompt's chunk, streams the weights from memory once, not once per 4 rows. Each chain is the same
 * arithmetic in every block, so a row's result does not depend on its block or chunk.
 *
 * 16-bit weights, with `wide` (room for 4·K float32, this thread's own; 0: none): where a chunk has two
 * or more blocks of 4 rows, its 4 columns are widened there once and every block reads float32 (the
 * same values, so the same sums), instead of each block widening them again.
 */
export function matmul<W>(x: usize, xs: i32, S: i32, K: i32, w: usize, n0: i32, N: i32, bias: usize, out: usize, os: i32, resid: bool, wide: usize): void {
  const K4 = K & ~3;
  const wRow = <usize>K * sizeof<W>();
  const xRow = <usize>xs << 2;
  const R = chunkRows(K);
  for (let s0 = 0; s0 < S; s0 += R) {
    const s1 = min(S, s0 + R);
    const s4 = s0 + ((s1 - s0) & ~3);
    const widen4 = sizeof<W>() == 2 && wide != 0 && s4 - s0 >= 8;
    let n = n0;
    for (; n + 4 <= N; n += 4) {
      const w0 = w + <usize>n * wRow;
      if (widen4) {
        widen<W>(w0, 4 * K, wide);
        columns4<f32>(x, xs, s0, s4, s1, out, os, wide, <usize>K << 2, n, K4, K, bias, resid);
      } else {
        columns4<W>(x, xs, s0, s4, s1, out, os, w0, wRow, n, K4, K, bias, resid);
      }
    }
    for (; n < N; n++) {
      const w0 = w + <usize>n * wRow;
      for (let s = s0; s < s4; s += 4) block4x1<W>(at(x, s * xs), xRow, at(out, s * os), os, w0, n, K4, K, bias, resid);
      for (let s = s4; s < s1; s++) block1x1<W>(at(x, s * xs), at(out, s * os), w0, n, K4, K, bias, resid);
    }
  }
}

/** n 16-bit values (W: bfloat16 or half) at `src` as float32 at `out` (an embedding row, a matmul's columns). */
export function widen<W>(src: usize, n: i32, out: usize): void {
  let k = 0;
  for (; k + 4 <= n; k += 4) v128.store(at(out, k), wv<W>(src, k));
  for (; k < n; k++) store<f32>(at(out, k), ws<W>(src, k));
}

/** A matmul's columns for thread t of T: a multiple of 4 each, the last thread to N. */
@inline export function colFrom(N: i32, t: i32, T: i32): i32 {
  return t == 0 ? 0 : first(N >> 2, t, T) << 2;
}
@inline export function colTo(N: i32, t: i32, T: i32): i32 {
  return t == T - 1 ? N : first(N >> 2, t + 1, T) << 2;
}
