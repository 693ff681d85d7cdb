import test from 'ava';
import { ModelConfigError } from '../../src/architectures/errors.ts';
import { checkLoraConfig, initLora, isLoraTarget, loraScale, mergeLora } from '../../src/architectures/lora.ts';

test('merging gives W + (alpha / r)·B·A, in place or not, and leaves a weight with a zero update its exact bits', (t) => {
  const [out, inDim, r] = [3, 5, 2];
  const base = Float32Array.from({ length: out * inDim }, (_, i) => (i % 4 === 0 ? -0 : i / 7 - 1));
  const A = Float32Array.from({ length: r * inDim }, (_, i) => Math.sin(i + 1));
  // Row 1 of B is zero: that row of the weight must come back bit for bit (−0 included).
  const B = Float32Array.from([0.5, -0.25, 0, 0, 2, 1]);
  const scale = loraScale({ rank: r, alpha: 4, targets: [] });
  t.is(scale, 2);
  const merged = new Float32Array(out * inDim);
  mergeLora(base, { A, B }, scale, out, inDim, merged);
  for (let i = 0; i < out; i++)
    for (let j = 0; j < inDim; j++) {
      let d = 0;
      for (let k = 0; k < r; k++) d += B[i * r + k]! * A[k * inDim + j]!;
      t.is(merged[i * inDim + j], Math.fround(d === 0 ? base[i * inDim + j]! : base[i * inDim + j]! + scale * d));
    }
  t.true(Object.is(base[8], -0) && Object.is(merged[8], -0), 'a zero update keeps −0');
  const inPlace = base.slice();
  mergeLora(inPlace, { A, B }, scale, out, inDim, inPlace);
  t.deepEqual(inPlace, merged);
});

test('fresh adapters: A uniform within ±1/√in from the seed, B zero; the same seed gives the same A', (t) => {
  const weights = [{ name: 'model.layers.0.self_attn.q_proj.weight', shape: [8, 64] }];
  const config = { rank: 4, alpha: 8, targets: ['q_proj'] };
  const a = initLora(config, weights, 7).pairs.get(weights[0]!.name)!;
  t.is(a.A.length, 4 * 64);
  t.true(a.A.every((x) => Math.abs(x) <= 1 / 8) && a.A.some((x) => Math.abs(x) > 0.1));
  t.true(a.B.length === 32 && a.B.every((x) => x === 0));
  t.deepEqual(initLora(config, weights, 7).pairs.get(weights[0]!.name)!.A, a.A);
  t.notDeepEqual(initLora(config, weights, 8).pairs.get(weights[0]!.name)!.A, a.A);
});

test('targets are matched by module name; a rank past the smallest side, a non-positive alpha, or no target is refused', (t) => {
  t.true(isLoraTarget('model.layers.3.self_attn.q_proj.weight', ['q_proj']));
  t.false(isLoraTarget('model.layers.3.self_attn.q_proj.bias', ['q_proj']));
  t.false(isLoraTarget('model.layers.3.self_attn.q_norm.weight', ['q_proj']));
  const shapes = [
    [8, 64],
    [64, 16],
  ];
  t.notThrows(() => checkLoraConfig({ rank: 8, alpha: 1, targets: [] }, shapes, '--lora'));
  for (const [config, message] of [
    [{ rank: 9, alpha: 1, targets: [] }, /--lora \(rank\): must be an integer from 1 to 8 \(got 9\)/],
    [{ rank: 1.5, alpha: 1, targets: [] }, /rank/],
    [{ rank: 0, alpha: 1, targets: [] }, /rank/],
    [{ rank: 2, alpha: 0, targets: [] }, /--lora \(alpha\): must be > 0/],
    [{ rank: 2, alpha: Number.NaN, targets: [] }, /alpha/],
  ] as const)
    t.throws(() => checkLoraConfig(config, shapes, '--lora'), { instanceOf: ModelConfigError, message });
  t.throws(() => checkLoraConfig({ rank: 1, alpha: 1, targets: ['nothing'] }, [], 'x'), { message: /adapt no weight/ });
});
