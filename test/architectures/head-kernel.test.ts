import test from 'ava';
import { HeadKernel } from '../../src/architectures/kernel/head-kernel.ts';

function rand(n: number, scale: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    a[i] = (s / 2 ** 32 - 0.5) * scale;
  }
  return a;
}

test('the fused head gives the same bits on 1, 2 and 3 threads, forward and backward (vocabulary blocks fixed, not by thread)', (t) => {
  const [V, d, N] = [1537, 24, 11];
  const w = rand(V * d, 1, 1);
  const h = rand(N * d, 2, 2);
  const targets = Int32Array.from({ length: N }, (_, i) => (i * 389) % V);
  const gl = rand(N, 2, 3);
  const ge = rand(N, 2, 4);
  const runs = [1, 2, 3].map((threads) => {
    const kernel = new HeadKernel({ threads });
    const fwd = kernel.forward({}, () => w, V, d, h, targets, 1 / 0.9);
    return { fwd, ...kernel.backward({}, () => w, V, d, h, targets, 1 / 0.9, fwd, gl, ge, true) };
  });
  const bytes = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength).toString('base64');
  for (const r of runs.slice(1)) {
    t.is(bytes(r.fwd.logprobs), bytes(runs[0]!.fwd.logprobs));
    t.is(bytes(r.fwd.entropy), bytes(runs[0]!.fwd.entropy));
    t.is(bytes(r.dh), bytes(runs[0]!.dh));
    t.is(bytes(r.dw!), bytes(runs[0]!.dw!));
  }
  // Log-probs are log-probs: below 0, and the entropies within [0, log V].
  t.true(runs[0]!.fwd.logprobs.every((x) => x < 0));
  t.true(runs[0]!.fwd.entropy.every((x) => x >= 0 && x <= Math.log(V) + 1e-4));
});

test('the head is read again only when its data changes (the key), and a frozen head gets no gradient', (t) => {
  const [V, d, N] = [40, 8, 5];
  const kernel = new HeadKernel({ threads: 1 });
  const h = rand(N * d, 2, 5);
  const targets = Int32Array.from([0, 1, 2, 3, 39]);
  const key = {};
  let reads = 0;
  const w1 = () => {
    reads++;
    return rand(V * d, 1, 6);
  };
  const a = kernel.forward(key, w1, V, d, h, targets, 1);
  kernel.forward(key, w1, V, d, h, targets, 1);
  t.is(reads, 1);
  const b = kernel.forward({}, () => rand(V * d, 1, 7), V, d, h, targets, 1);
  t.notDeepEqual([...a.logprobs], [...b.logprobs]);
  const back = kernel.backward(
    {},
    () => rand(V * d, 1, 7),
    V,
    d,
    h,
    targets,
    1,
    b,
    new Float32Array(N).fill(1),
    new Float32Array(N),
    false,
  );
  t.is(back.dw, null);
  t.is(back.dh.length, N * d);
});
