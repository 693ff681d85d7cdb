// AssemblyScript (compiled by bin/build-kernel.js into head-loss-wasm.ts; not TypeScript).
//
// The vocabulary head's log-softmax at chosen tokens, forward and backward, fused: the logits of a
// tile of 4 rows × up to 128 vocabulary rows live in a few kilobytes of scratch and are used there
// (the forward pass's running max and normalizer, the backward pass's gradient to the hidden states
// and to the head), so no [rows × vocabulary] array is ever made. Host: ./head-kernel.ts.
//
//   L = (h · Wᵀ)·invT;  lse = log Σ_v e^L;  logp = L[target] − lse;  H = lse − Σ_v p·L
//   ∂/∂L[v] = −p[v]·(a + ge·L[v]) + gl·[v = target],  a = gl + ge·(H − lse)
//
// where gl and ge are the upstream gradients of a row's log-prob and entropy.
//
// Determinism: the vocabulary is cut into B blocks (B fixed by the host, not by the thread count);
// each block's partial results (a row's max, normalizer and Σ e^L·L; a block's share of ∂h) are
// computed by one thread in one fixed order and combined by the host in block order, and a head
// row's gradient belongs to one block. So the results are the same bits for any number of threads.
// Rows come in fours (the host pads with zero rows, whose upstream gradients are zero).

import { at, expv, hsum } from './simd.as';
import { barrier, first } from './threads.as';

/** Vocabulary rows per tile: 4 rows × 128 logits (and their gradients) stay in L1. */
const VS: i32 = 128;

/** Bytes of scratch per thread. */
export function scratchBytes(): i32 {
  return 2 * 4 * VS * 4;
}

/**
 * L[r][j] = invT · h[r]·W[v0 + j] for the 4 rows at `h` and the `nv` head rows at `w` (row stride
 * d floats, d a multiple of 4), into `L` [4][VS]. Each logit is one dot product (four lanes over k
 * ascending, then hsum), whichever block computes it.
 */
function logits(w: usize, nv: i32, d: i32, h: usize, L: usize, invT: f32): void {
  const row = <usize>d << 2;
  const h0 = h;
  const h1 = h0 + row;
  const h2 = h1 + row;
  const h3 = h2 + row;
  let j = 0;
  for (; j + 2 <= nv; j += 2) {
    const w0 = w + <usize>j * row;
    const w1 = w0 + row;
    let a00 = f32x4.splat(0), a01 = f32x4.splat(0), a10 = f32x4.splat(0), a11 = f32x4.splat(0);
    let a20 = f32x4.splat(0), a21 = f32x4.splat(0), a30 = f32x4.splat(0), a31 = f32x4.splat(0);
    for (let k = 0; k < d; k += 4) {
      const o = <usize>k << 2;
      const b0 = v128.load(w0 + o), b1 = v128.load(w1 + o);
      let c = v128.load(h0 + o);
      a00 = f32x4.add(a00, f32x4.mul(c, b0)); a01 = f32x4.add(a01, f32x4.mul(c, b1));
      c = v128.load(h1 + o);
      a10 = f32x4.add(a10, f32x4.mul(c, b0)); a11 = f32x4.add(a11, f32x4.mul(c, b1));
      c = v128.load(h2 + o);
      a20 = f32x4.add(a20, f32x4.mul(c, b0)); a21 = f32x4.add(a21, f32x4.mul(c, b1));
      c = v128.load(h3 + o);
      a30 = f32x4.add(a30, f32x4.mul(c, b0)); a31 = f32x4.add(a31, f32x4.mul(c, b1));
    }
    store<f32>(at(L, j), hsum(a00) * invT);
    store<f32>(at(L, j + 1), hsum(a01) * invT);
    store<f32>(at(L, VS + j), hsum(a10) * invT);
    store<f32>(at(L, VS + j + 1), hsum(a11) * invT);
    store<f32>(at(L, 2 * VS + j), hsum(a20) * invT);
    store<f32>(at(L, 2 * VS + j + 1), hsum(a21) * invT);
    store<f32>(at(L, 3 * VS + j), hsum(a30) * invT);
    store<f32>(at(L, 3 * VS + j + 1), hsum(a31) * invT);
  }
  for (; j < nv; j++) {
    const w0 = w + <usize>j * row;
    let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
    for (let k = 0; k < d; k += 4) {
      const o = <usize>k << 2;
      const b0 = v128.load(w0 + o);
      a0 = f32x4.add(a0, f32x4.mul(v128.load(h0 + o), b0));
      a1 = f32x4.add(a1, f32x4.mul(v128.load(h1 + o), b0));
      a2 = f32x4.add(a2, f32x4.mul(v128.load(h2 + o), b0));
      a3 = f32x4.add(a3, f32x4.mul(v128.load(h3 + o), b0));
    }
    store<f32>(at(L, j), hsum(a0) * invT);
    store<f32>(at(L, VS + j), hsum(a1) * invT);
    store<f32>(at(L, 2 * VS + j), hsum(a2) * invT);
    store<f32>(at(L, 3 * VS + j), hsum(a3) * invT);
  }
}

/**
 * Forward. For each block b of the thread's share, each row n: stats[b][n] = (m, s, t), the block's
 * max logit, Σ e^(L−m) and Σ e^(L−m)·L, accumulated tile by tile (rescaled when the max grows); and
 * chosen[n] = L[target[n]] by the block that holds the target.
 */
export function forward(
  w: usize, V: i32, d: i32, h: usize, N4: i32, targets: usize, invT: f32, B: i32,
  stats: usize, chosen: usize, scratch: usize, t: i32, T: i32, sync: usize,
): void {
  const L = scratch + <usize>t * <usize>scratchBytes();
  const row = <usize>d << 2;
  for (let b = first(B, t, T); b < first(B, t + 1, T); b++) {
    const v0 = first(V, b, B);
    const v1 = first(V, b + 1, B);
    const st = stats + ((<usize>b * <usize>N4 * 3) << 2);
    for (let n = 0; n < N4; n++) {
      store<f32>(at(st, 3 * n), -Infinity);
      store<f32>(at(st, 3 * n + 1), 0);
      store<f32>(at(st, 3 * n + 2), 0);
    }
    for (let sv = v0; sv < v1; sv += VS) {
      const nv = min(VS, v1 - sv);
      const nv4 = nv & ~3;
      for (let n = 0; n < N4; n += 4) {
        logits(w + <usize>sv * row, nv, d, h + <usize>n * row, L, invT);
        for (let r = 0; r < 4; r++) {
          const l = at(L, r * VS);
          const s3 = at(st, 3 * (n + r));
          let mv = f32x4.splat(-Infinity);
          let j = 0;
          for (; j < nv4; j += 4) mv = f32x4.max(mv, v128.load(at(l, j)));
          let mx = Mathf.max(
            Mathf.max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
            Mathf.max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
          );
          for (; j < nv; j++) mx = Mathf.max(mx, load<f32>(at(l, j)));
          const mOld = load<f32>(s3);
          const m = Mathf.max(mOld, mx);
          const scale: f32 = mOld == -Infinity ? 0 : Mathf.exp(mOld - m);
          const mm = f32x4.splat(m);
          let se = f32x4.splat(0);
          let te = f32x4.splat(0);
          for (j = 0; j < nv4; j += 4) {
            const x = v128.load(at(l, j));
            const e = expv(f32x4.sub(x, mm));
            se = f32x4.add(se, e);
            te = f32x4.add(te, f32x4.mul(e, x));
          }
          let s = hsum(se);
          let tt = hsum(te);
          for (; j < nv; j++) {
            const x = load<f32>(at(l, j));
            const e = Mathf.exp(x - m);
            s += e;
            tt += e * x;
          }
          store<f32>(s3, m);
          store<f32>(s3 + 4, load<f32>(s3 + 4) * scale + s);
          store<f32>(s3 + 8, load<f32>(s3 + 8) * scale + tt);
          const target = load<i32>(at(targets, n + r));
          if (target >= sv && target < sv + nv) store<f32>(at(chosen, n + r), load<f32>(at(l, target - sv)));
        }
      }
    }
  }
  barrier(sync, T);
}

/**
 * Backward. rowp [N4][4]: each row's lse, a, ge, gl (see the top). For each block b of the thread's
 * share: dhParts[b] [N4][d] = Σ over the block's v of ∂L[n][v]·invT·W[v]; and, when dW is not 0,
 * dW[v] = Σ_n ∂L[n][v]·invT·h[n] for the block's rows of the head.
 */
export function backward(
  w: usize, V: i32, d: i32, h: usize, N4: i32, targets: usize, invT: f32, B: i32,
  rowp: usize, dhParts: usize, dW: usize, scratch: usize, t: i32, T: i32, sync: usize,
): void {
  const L = scratch + <usize>t * <usize>scratchBytes();
  const G = L + ((<usize>4 * <usize>VS) << 2);
  const row = <usize>d << 2;
  const it = f32x4.splat(invT);
  for (let b = first(B, t, T); b < first(B, t + 1, T); b++) {
    const v0 = first(V, b, B);
    const v1 = first(V, b + 1, B);
    const dhb = dhParts + <usize>b * <usize>N4 * row;
    memory.fill(dhb, 0, <usize>N4 * row);
    if (dW) memory.fill(dW + <usize>v0 * row, 0, <usize>(v1 - v0) * row);
    for (let sv = v0; sv < v1; sv += VS) {
      const nv = min(VS, v1 - sv);
      const nv4 = nv & ~3;
      const ws = w + <usize>sv * row;
      for (let n = 0; n < N4; n += 4) {
        const hn = h + <usize>n * row;
        logits(ws, nv, d, hn, L, invT);
        // G[r][j] = invT · ∂/∂L[r][j]
        for (let r = 0; r < 4; r++) {
          const p = at(rowp, 4 * (n + r));
          const lse = load<f32>(p);
          const a = load<f32>(p, 4);
          const ge = load<f32>(p, 8);
          const gl = load<f32>(p, 12);
          const l = at(L, r * VS);
          const g = at(G, r * VS);
          const lv = f32x4.splat(lse);
          const av = f32x4.splat(a);
          const gv = f32x4.splat(ge);
          let j = 0;
          for (; j < nv4; j += 4) {
            const x = v128.load(at(l, j));
            const e = expv(f32x4.sub(x, lv));
            v128.store(at(g, j), f32x4.mul(f32x4.neg(f32x4.mul(e, f32x4.add(av, f32x4.mul(gv, x)))), it));
          }
          for (; j < nv; j++) {
            const x = load<f32>(at(l, j));
            store<f32>(at(g, j), -(Mathf.exp(x - lse) * (a + ge * x)) * invT);
          }
          const target = load<i32>(at(targets, n + r));
          if (target >= sv && target < sv + nv) {
            const gt = at(g, target - sv);
            store<f32>(gt, load<f32>(gt) + gl * invT);
          }
        }
        // ∂h[r] += Σ_j G[r][j]·W[sv + j], two rows at a time, 16 columns at a time.
        for (let r = 0; r < 4; r += 2) {
          const g0 = at(G, r * VS);
          const g1 = at(G, (r + 1) * VS);
          const o0 = dhb + <usize>(n + r) * row;
          const o1 = o0 + row;
          let k = 0;
          for (; k + 16 <= d; k += 16) {
            const o = <usize>k << 2;
            let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
            let e0 = f32x4.splat(0), e1 = f32x4.splat(0), e2 = f32x4.splat(0), e3 = f32x4.splat(0);
            for (let j = 0; j < nv; j++) {
              const wj = ws + <usize>j * row + o;
              const x0 = v128.load(wj), x1 = v128.load(wj, 16), x2 = v128.load(wj, 32), x3 = v128.load(wj, 48);
              const s0 = f32x4.splat(load<f32>(at(g0, j)));
              const s1 = f32x4.splat(load<f32>(at(g1, j)));
              c0 = f32x4.add(c0, f32x4.mul(s0, x0)); c1 = f32x4.add(c1, f32x4.mul(s0, x1));
              c2 = f32x4.add(c2, f32x4.mul(s0, x2)); c3 = f32x4.add(c3, f32x4.mul(s0, x3));
              e0 = f32x4.add(e0, f32x4.mul(s1, x0)); e1 = f32x4.add(e1, f32x4.mul(s1, x1));
              e2 = f32x4.add(e2, f32x4.mul(s1, x2)); e3 = f32x4.add(e3, f32x4.mul(s1, x3));
            }
            v128.store(o0 + o, f32x4.add(v128.load(o0 + o), c0));
            v128.store(o0 + o, f32x4.add(v128.load(o0 + o, 16), c1), 16);
            v128.store(o0 + o, f32x4.add(v128.load(o0 + o, 32), c2), 32);
            v128.store(o0 + o, f32x4.add(v128.load(o0 + o, 48), c3), 48);
            v128.store(o1 + o, f32x4.add(v128.load(o1 + o), e0));
            v128.store(o1 + o, f32x4.add(v128.load(o1 + o, 16), e1), 16);
            v128.store(o1 + o, f32x4.add(v128.load(o1 + o, 32), e2), 32);
            v128.store(o1 + o, f32x4.add(v128.load(o1 + o, 48), e3), 48);
          }
          for (; k < d; k += 4) {
            const o = <usize>k << 2;
            let c0 = f32x4.splat(0), e0 = f32x4.splat(0);
            for (let j = 0; j < nv; j++) {
              const x0 = v128.load(ws + <usize>j * row + o);
              c0 = f32x4.add(c0, f32x4.mul(f32x4.splat(load<f32>(at(g0, j))), x0));
              e0 = f32x4.add(e0, f32x4.mul(f32x4.splat(load<f32>(at(g1, j))), x0));
            }
            v128.store(o0 + o, f32x4.add(v128.load(o0 + o), c0));
            v128.store(o1 + o, f32x4.add(v128.load(o1 + o), e0));
          }
        }
        // ∂W[sv + j] += Σ_r G[r][j]·h[r], the 4 rows in order.
        if (dW) {
          const h0 = hn, h1 = hn + row, h2 = h1 + row, h3 = h2 + row;
          for (let j = 0; j < nv; j++) {
            const dw = dW + <usize>(sv + j) * row;
            const s0 = f32x4.splat(load<f32>(at(G, j)));
            const s1 = f32x4.splat(load<f32>(at(G, VS + j)));
            const s2 = f32x4.splat(load<f32>(at(G, 2 * VS + j)));
            const s3 = f32x4.splat(load<f32>(at(G, 3 * VS + j)));
            for (let k = 0; k < d; k += 4) {
              const o = <usize>k << 2;
              let acc = v128.load(dw + o);
              acc = f32x4.add(acc, f32x4.mul(s0, v128.load(h0 + o)));
              acc = f32x4.add(acc, f32x4.mul(s1, v128.load(h1 + o)));
              acc = f32x4.add(acc, f32x4.mul(s2, v128.load(h2 + o)));
              acc = f32x4.add(acc, f32x4.mul(s3, v128.load(h3 + o)));
              v128.store(dw + o, acc);
            }
          }
        }
      }
    }
  }
  barrier(sync, T);
}
