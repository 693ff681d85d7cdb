import test from 'ava';
import { fromFloat32 } from '../../src/formats/dtype.ts';
import { LinearKernel, type LinearMatrix, type MatrixFormat } from '../../src/architectures/kernel/linear-kernel.ts';
import { KernelError } from '../../src/architectures/kernel/kernel-host.ts';
import { createRng } from '../../src/core/rng.ts';

// The frozen base's products for training: x·Wᵀ and dy·W against a matrix kept in its checkpoint's
// dtype, on every thread, the same bits for any number of threads.

const rng = createRng(3);
const randn = (n: number, scale = 1) => Float32Array.from({ length: n }, () => (rng.next() * 2 - 1) * scale);

/** A [rows][cols] matrix in `format` and its exact float32 values. */
function matrix(
  name: string,
  rows: number,
  cols: number,
  format: MatrixFormat,
): { m: LinearMatrix; wide: Float32Array } {
  const raw = randn(rows * cols, 0.05);
  if (format === 'F32') return { m: { name, rows, cols, format, values: raw }, wide: raw };
  const bytes = fromFloat32(raw, format);
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, raw.length).slice();
  const m = { name, rows, cols, format, values: bits };
  return { m, wide: new LinearKernel([m], { threads: 1 }).values(name) };
}

/** out[s][n] = Σ_k x[s][k]·w[n][k] in double precision. */
function reference(x: Float32Array, S: number, K: number, w: Float32Array, N: number, transposed: boolean) {
  const out = new Float64Array(S * N);
  for (let s = 0; s < S; s++)
    for (let n = 0; n < N; n++) {
      let a = 0;
      for (let k = 0; k < K; k++) a += x[s * K + k]! * (transposed ? w[k * N + n]! : w[n * K + k]!);
      out[s * N + n] = a;
    }
  return out;
}

for (const format of ['F32', 'BF16', 'F16'] as const) {
  test(`${format}: x·Wᵀ and dy·W as in double precision, the same bits on 1 and 3 threads`, (t) => {
    const [N, K, S] = [37, 22, 9];
    const { m, wide } = matrix('w', N, K, format);
    const one = new LinearKernel([m], { threads: 1 });
    const three = new LinearKernel([m], { threads: 3 });
    try {
      const x = randn(S * K);
      const dy = randn(S * N);
      const y = one.apply('w', x, S);
      const dx = one.apply('w', dy, S, true);
      t.deepEqual(three.apply('w', x, S), y);
      t.deepEqual(three.apply('w', dy, S, true), dx);
      const close = (got: Float32Array, want: Float64Array) => got.every((v, i) => Math.abs(v - want[i]!) < 1e-5);
      t.true(close(y, reference(x, S, K, wide, N, false)));
      // dy·W is dy·(Wᵀ)ᵀ: W read down its columns.
      t.true(close(dx, reference(dy, S, N, wide, K, true)));
      t.deepEqual(one.shape('w'), [N, K]);
    } finally {
      one.dispose();
      three.dispose();
    }
  });
}

for (const format of ['BF16', 'F16'] as const)
  test(`${format}: a row’s outputs do not depend on the other rows of the call (13 rows widen the columns once; one reads them as stored)`, (t) => {
    const [N, K, S] = [18, 14, 13];
    const { m } = matrix('w', N, K, format);
    const k = new LinearKernel([m], { threads: 2 });
    try {
      const x = randn(S * K);
      const all = k.apply('w', x, S);
      for (const r of [0, 5, 12])
        t.deepEqual(k.apply('w', x.subarray(r * K, (r + 1) * K), 1), all.subarray(r * N, (r + 1) * N));
      t.deepEqual(k.apply('w', x.subarray(0, 5 * K), 5), all.subarray(0, 5 * N));
    } finally {
      k.dispose();
    }
  });

test('bad input: an unknown matrix, inputs of the wrong size, values that do not match the shape or format, a name twice', (t) => {
  const { m } = matrix('w', 4, 4, 'F32');
  const k = new LinearKernel([m], { threads: 1 });
  t.throws(() => k.apply('nope', new Float32Array(4), 1), { instanceOf: KernelError, message: /holds no nope/ });
  t.throws(() => k.apply('w', new Float32Array(5), 1), {
    instanceOf: KernelError,
    message: /5 inputs are not 1 rows of 4/,
  });
  k.dispose();
  t.throws(() => new LinearKernel([{ ...m, rows: 3 }]), {
    instanceOf: KernelError,
    message: /16 values for a \[3, 4\]/,
  });
  t.throws(() => new LinearKernel([{ ...m, format: 'BF16' }]), { instanceOf: KernelError, message: /16-bit bits/ });
  t.throws(() => new LinearKernel([m, m]), { instanceOf: KernelError, message: /w twice/ });
});

test('matrices past one memory’s share are spread over several, each computing as alone', (t) => {
  const a = matrix('a', 24, 16, 'BF16').m;
  const b = matrix('b', 20, 16, 'F32').m;
  const split = new LinearKernel([a, b], { threads: 2, bytesPerMemory: 3000 });
  const alone = new LinearKernel([a, b], { threads: 2 });
  try {
    t.is(split.memories, 2);
    t.is(alone.memories, 1);
    const x = randn(3 * 16);
    for (const name of ['a', 'b']) t.deepEqual(split.apply(name, x, 3), alone.apply(name, x, 3));
    t.deepEqual(split.apply('b', randn(3 * 20), 3, true).length, 3 * 16);
    t.throws(() => new LinearKernel([a], { bytesPerMemory: 1024 }), { instanceOf: KernelError, message: /do not fit/ });
  } finally {
    split.dispose();
    alone.dispose();
  }
});

test('a trained matrix: rewritten in place, and its gradient dyᵀ·x as in double precision, the same bits on 1 and 3 threads', (t) => {
  const [N, K, S] = [13, 10, 7];
  const { m } = matrix('w', N, K, 'F32');
  const one = new LinearKernel([m], { threads: 1 });
  const three = new LinearKernel([m], { threads: 3 });
  try {
    const next = randn(N * K, 0.05);
    one.set('w', next);
    three.set('w', next);
    t.deepEqual(one.values('w'), next);
    const x = randn(S * K);
    t.true(one.apply('w', x, S).every((v, i) => Math.abs(v - reference(x, S, K, next, N, false)[i]!) < 1e-5));
    const dy = randn(S * N);
    // dW[n][k] = Σ_s dy[s][n]·x[s][k]: the reference over dyᵀ [N][S] and xᵀ [K][S].
    const tr = (a: Float32Array, rows: number, cols: number) =>
      Float32Array.from({ length: rows * cols }, (_, i) => a[(i % rows) * cols + Math.floor(i / rows)]!);
    const dW = one.outer(dy, x, S, N, K);
    const want = reference(tr(dy, S, N), N, S, tr(x, S, K), K, false);
    t.true(dW.every((v, i) => Math.abs(v - want[i]!) < 1e-5));
    t.deepEqual(three.outer(dy, x, S, N, K), dW);
    t.throws(() => one.outer(dy, x, S + 1, N, K), { instanceOf: KernelError, message: /are not 8 rows/ });
    t.throws(() => one.set('w', new Float32Array(3)), {
      instanceOf: KernelError,
      message: /3 values for a \[13, 10\]/,
    });
  } finally {
    one.dispose();
    three.dispose();
  }
});

test('a 16-bit matrix is not rewritten (a frozen base keeps its checkpoint’s values)', (t) => {
  const { m } = matrix('w', 4, 4, 'BF16');
  const k = new LinearKernel([m], { threads: 1 });
  t.throws(() => k.set('w', new Float32Array(16)), { instanceOf: KernelError, message: /kept as BF16/ });
  k.dispose();
});
