// AssemblyScript (not TypeScript): the SIMD pieces the decode kernels share (the GPT's,
// ../gpt/kernel/decode-step.as.ts, and the Llama family's, ../llama/kernel/llama-step.as.ts).
// Every reduction here runs in an order fixed by its own sizes, lane by lane, with no FMA, so a row's
// numbers do not depend on what else is in the batch.

// ---- table and pointer helpers (i32 slots written by the host) ----

@inline export function slot(table: usize, i: i32): i32 {
  return load<i32>(table + (<usize>i << 2));
}
@inline export function ptr(table: usize, i: i32): usize {
  return <usize>load<i32>(table + (<usize>i << 2));
}
@inline export function at(base: usize, i: i32): usize {
  return base + (<usize>i << 2);
}
@inline export function ceil8(n: i32): i32 {
  return (n + 7) & ~7;
}

/** e^x (Cephes expf: range reduction by ln 2, degree-5 polynomial, 2^n from the exponent bits); ~1 ulp. */
@inline export function expv(xin: v128): v128 {
  let x = f32x4.min(f32x4.max(xin, f32x4.splat(-87.33654)), f32x4.splat(88.37626));
  const fx = f32x4.floor(f32x4.add(f32x4.mul(x, f32x4.splat(1.44269504088896341)), f32x4.splat(0.5)));
  x = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(0.693359375)));
  x = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(-2.12194440e-4)));
  let y = f32x4.splat(1.9875691500e-4);
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(1.3981999507e-3));
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(8.3334519073e-3));
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(4.1665795894e-2));
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(1.6666665459e-1));
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(5.0000001201e-1));
  y = f32x4.add(f32x4.add(f32x4.mul(y, f32x4.mul(x, x)), x), f32x4.splat(1.0));
  const n = i32x4.trunc_sat_f32x4_s(fx);
  const scale = i32x4.shl(i32x4.add(n, i32x4.splat(127)), 23);
  return f32x4.mul(y, scale);
}

/** 1 / (1 + e^-x). */
@inline export function sigmoidv(x: v128): v128 {
  return f32x4.div(f32x4.splat(1.0), f32x4.add(f32x4.splat(1.0), expv(f32x4.neg(x))));
}

/** Lanes summed as (l0 + l1) + (l2 + l3). */
@inline export function hsum(v: v128): f32 {
  return (
    f32x4.extract_lane(v, 0) +
    f32x4.extract_lane(v, 1) +
    (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3))
  );
}

/** Σ a[i]·b[i], i < n: four lanes of partial sums, then hsum, then the tail in order. */
@inline export function dot(a: usize, b: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) acc = f32x4.add(acc, f32x4.mul(v128.load(at(a, i)), v128.load(at(b, i))));
  let s = hsum(acc);
  for (; i < n; i++) s += load<f32>(at(a, i)) * load<f32>(at(b, i));
  return s;
}

/**
 * Scores of query q (dh columns) against keys k[t] (a stride of d floats), t < n, into sc; returns their
 * max. Each key's dot product is four lanes of partial sums (c ascending) reduced as hsum does, then
 * the columns past the last multiple of 4 in order; keys go four at a time where dh allows.
 */
export function scores(q: usize, k: usize, d: i32, dh: i32, n: i32, sc: usize): f32 {
  const stride = <usize>d << 2;
  let max: f32 = -Infinity;
  let kp = k;
  let t = 0;
  if ((dh & 3) == 0) {
    // Four keys at a time: each key's four lanes of partial sums, reduced as hsum does.
    let mx = f32x4.splat(-Infinity);
    for (; t + 4 <= n; t += 4) {
      let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
      for (let c = 0; c < dh; c += 4) {
        const qv = v128.load(at(q, c));
        const o = <usize>c << 2;
        a0 = f32x4.add(a0, f32x4.mul(qv, v128.load(kp + o)));
        a1 = f32x4.add(a1, f32x4.mul(qv, v128.load(kp + stride + o)));
        a2 = f32x4.add(a2, f32x4.mul(qv, v128.load(kp + 2 * stride + o)));
        a3 = f32x4.add(a3, f32x4.mul(qv, v128.load(kp + 3 * stride + o)));
      }
      const s01 = f32x4.add(f32x4.shuffle(a0, a1, 0, 4, 2, 6), f32x4.shuffle(a0, a1, 1, 5, 3, 7));
      const s23 = f32x4.add(f32x4.shuffle(a2, a3, 0, 4, 2, 6), f32x4.shuffle(a2, a3, 1, 5, 3, 7));
      const r = f32x4.add(f32x4.shuffle(s01, s23, 0, 1, 4, 5), f32x4.shuffle(s01, s23, 2, 3, 6, 7));
      v128.store(at(sc, t), r);
      mx = f32x4.max(mx, r);
      kp += 4 * stride;
    }
    max = Mathf.max(
      Mathf.max(f32x4.extract_lane(mx, 0), f32x4.extract_lane(mx, 1)),
      Mathf.max(f32x4.extract_lane(mx, 2), f32x4.extract_lane(mx, 3)),
    );
  }
  for (; t < n; t++) {
    const s = dot(q, kp, dh);
    store<f32>(at(sc, t), s);
    if (s > max) max = s;
    kp += stride;
  }
  return max;
}

/**
 * Softmax attention of one query q (dh columns, scaled) over keys k[t] (a stride of d floats), t < n,
 * into out[dh]: scores, exp(score − max), Σ, then Σ_t e_t·v[t] / Σ.
 */
export function attend(q: usize, k: usize, v: usize, d: i32, dh: i32, n: i32, sc: usize, out: usize): void {
  const stride = <usize>d << 2;
  const max = scores(q, k, d, dh, n, sc);
  const mv = f32x4.splat(max);
  let zv = f32x4.splat(0);
  let t = 0;
  for (; t + 4 <= n; t += 4) {
    const e = expv(f32x4.sub(v128.load(at(sc, t)), mv));
    v128.store(at(sc, t), e);
    zv = f32x4.add(zv, e);
  }
  let z = hsum(zv);
  if (t < n) {
    const e = expv(f32x4.sub(v128.load(at(sc, t)), mv));
    v128.store(at(sc, t), e);
    for (let j = t; j < n; j++) z += load<f32>(at(sc, j));
  }
  const zi = f32x4.splat(z);
  let c = 0;
  for (; c + 16 <= dh; c += 16) {
    let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
    let vp = at(v, c);
    for (let j = 0; j < n; j++) {
      const p = v128.load32_splat(at(sc, j));
      a0 = f32x4.add(a0, f32x4.mul(p, v128.load(vp)));
      a1 = f32x4.add(a1, f32x4.mul(p, v128.load(vp, 16)));
      a2 = f32x4.add(a2, f32x4.mul(p, v128.load(vp, 32)));
      a3 = f32x4.add(a3, f32x4.mul(p, v128.load(vp, 48)));
      vp += stride;
    }
    v128.store(at(out, c), f32x4.div(a0, zi));
    v128.store(at(out, c + 4), f32x4.div(a1, zi));
    v128.store(at(out, c + 8), f32x4.div(a2, zi));
    v128.store(at(out, c + 12), f32x4.div(a3, zi));
  }
  for (; c + 4 <= dh; c += 4) {
    let a0 = f32x4.splat(0);
    let vp = at(v, c);
    for (let j = 0; j < n; j++) {
      a0 = f32x4.add(a0, f32x4.mul(f32x4.splat(load<f32>(at(sc, j))), v128.load(vp)));
      vp += stride;
    }
    v128.store(at(out, c), f32x4.div(a0, zi));
  }
  for (; c < dh; c++) {
    let a: f32 = 0;
    let vp = at(v, c);
    for (let j = 0; j < n; j++) {
      a += load<f32>(at(sc, j)) * load<f32>(vp);
      vp += stride;
    }
    store<f32>(at(out, c), a / z);
  }
}

/**
 * Sampling weights for R rows of logits (row stride `stride`, V used): w = exp((l − max)·invT),
 * written at `out` with the same stride. The host draws from them and sums them (in order) for the
 * normalizer.
 */
export function weigh(logits: usize, R: i32, V: i32, stride: i32, out: usize, invT: f32): void {
  const it = f32x4.splat(invT);
  for (let r = 0; r < R; r++) {
    const l = at(logits, r * stride);
    const w = at(out, r * stride);
    let mv = f32x4.splat(-Infinity);
    let i = 0;
    for (; i + 4 <= V; i += 4) mv = f32x4.max(mv, v128.load(at(l, i)));
    let max = Mathf.max(
      Mathf.max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
      Mathf.max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
    );
    for (; i < V; i++) max = Mathf.max(max, load<f32>(at(l, i)));
    const m = f32x4.splat(max);
    // The last group may run past V into the row's padding (stride ≥ ceil8(V)): harmless lanes.
    for (i = 0; i < V; i += 4) v128.store(at(w, i), expv(f32x4.mul(f32x4.sub(v128.load(at(l, i)), m), it)));
  }
}
