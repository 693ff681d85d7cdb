import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdamW, clipByGlobalNorm, OptimizerError, scheduleLr, type DecayForm } from '../../../src/policy/tfjs/adamw.ts';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';

test.before(async () => {
  await initBackend('wasm');
});

const f = Math.fround;
const near = (t: any, a: number, b: number, eps = 1e-6) => t.true(Math.abs(a - b) < eps, `${a} vs ${b}`);
let uid = 0;
const vars = (): tf.Variable[] => [
  tf.variable(
    tf.tensor2d([
      [0.5, -1.25],
      [2, 0.1],
    ]),
    true,
    `adamw-test/w${uid++}`,
  ),
  tf.variable(tf.tensor1d([0.3, -0.7]), true, `adamw-test/b${uid++}`),
];
const gradsOf = (vs: tf.Variable[], w: number[][], b: number[]): tf.NamedTensorMap => ({
  [vs[0]!.name]: tf.tensor2d(w),
  [vs[1]!.name]: tf.tensor1d(b),
});

/**
 * One update of one weight in float32, op by op as the optimizer's kernels do it (every tensor op
 * rounds to float32; a JS number operand becomes a float32 scalar).
 */
function reference(p: number, g: number, o: { lr: number; wd: number; form: DecayForm; matrix: boolean }): number {
  const b1 = 0.9;
  const b2 = 0.999;
  const m = f(f(0 * f(b1)) + f(g * f(1 - b1)));
  const v = f(f(0 * f(b2)) + f(f(g * g) * f(1 - b2)));
  const u = f(f(m / f(1 - b1)) / f(f(Math.sqrt(f(v / f(1 - b2)))) + f(1e-8)));
  const decays = o.wd > 0 && o.matrix;
  if (o.form === 'torch') return f((decays ? f(p * f(1 - o.lr * o.wd)) : p) - f(u * f(o.lr)));
  return f(p - f((decays ? f(u + f(p * f(o.wd))) : u) * f(o.lr)));
}

for (const form of ['torch', 'optax'] as const) {
  test(`one ${form} step is that form's formula, in float32, op for op (decay on matrices only)`, (t) => {
    const vs = vars();
    const before = vs.map((v) => Array.from(v.dataSync()));
    const opt = new AdamW(vs, { lr: 0.01, weightDecay: 0.1, decayForm: form });
    const grads = gradsOf(
      vs,
      [
        [0.2, -0.05],
        [1.5, 0],
      ],
      [-0.3, 0.01],
    );
    opt.step(grads);
    const gw = [0.2, -0.05, 1.5, 0];
    const gb = [-0.3, 0.01];
    const expect = (k: number, g: number[], matrix: boolean) =>
      before[k]!.map((p, i) => reference(p, f(g[i]!), { lr: 0.01, wd: 0.1, form, matrix }));
    t.deepEqual(Array.from(vs[0]!.dataSync()), expect(0, gw, true));
    t.deepEqual(Array.from(vs[1]!.dataSync()), expect(1, gb, false));
    t.is(opt.steps, 1);
    tf.dispose([...Object.values(grads), ...vs]);
    opt.dispose();
  });
}

test('the two decay forms agree to float32 rounding, and a missing gradient leaves its variable alone', (t) => {
  const [a, b] = [vars(), vars()];
  const oa = new AdamW(a, { lr: 0.05, weightDecay: 0.2, decayForm: 'torch' });
  const ob = new AdamW(b, { lr: 0.05, weightDecay: 0.2, decayForm: 'optax' });
  const biasBefore = Array.from(a[1]!.dataSync());
  for (let i = 0; i < 5; i++) {
    const ga = {
      [a[0]!.name]: tf.tensor2d([
        [0.2, -0.1 * i],
        [1, 0.5],
      ]),
    };
    const gb = {
      [b[0]!.name]: tf.tensor2d([
        [0.2, -0.1 * i],
        [1, 0.5],
      ]),
    };
    oa.step(ga);
    ob.step(gb);
    tf.dispose([...Object.values(ga), ...Object.values(gb)]);
  }
  const wa = a[0]!.dataSync();
  const wb = b[0]!.dataSync();
  wa.forEach((x, i) => near(t, x, wb[i]!, 1e-6));
  t.deepEqual(Array.from(a[1]!.dataSync()), biasBefore);
  tf.dispose([...a, ...b]);
  oa.dispose();
  ob.dispose();
});

test('schedule: linear warm-up, cosine decay to the floor; without one the rate is constant', async (t) => {
  const o = { lr: 1, warmupSteps: 10, totalSteps: 110, minLrRatio: 0.1 };
  t.is(scheduleLr(0, o), 0.1);
  t.is(scheduleLr(9, o), 1);
  t.is(scheduleLr(10, o), 1);
  near(t, scheduleLr(60, o), 0.55, 1e-9);
  near(t, scheduleLr(110, o), 0.1, 1e-9);
  near(t, scheduleLr(500, o), 0.1, 1e-9);
  const vs = vars();
  const scheduled = new AdamW(vs, { lr: 1, schedule: { warmupSteps: 10, totalSteps: 110 } });
  const flat = new AdamW(vs, { lr: 0.3 });
  t.is(scheduled.currentLr(), 0.1);
  t.is(flat.currentLr(), 0.3);
  const stats = await scheduled.minimize(() => tf.sum(tf.mul(vs[0]!, 2)) as tf.Scalar);
  t.deepEqual([stats.lr, stats.step, scheduled.currentLr()], [0.1, 1, 0.2]);
  t.is(flat.currentLr(), 0.3);
  tf.dispose(vs);
  scheduled.dispose();
  flat.dispose();
});

test('global grad-norm clipping scales every gradient by maxNorm / (norm + eps)', async (t) => {
  const { grads, norm } = await clipByGlobalNorm({ a: tf.tensor1d([3]), b: tf.tensor1d([0, 4]) }, 1);
  near(t, norm, 5);
  near(t, grads.a!.dataSync()[0]!, 0.6);
  near(t, grads.b!.dataSync()[1]!, 0.8);
  // eps 0: exactly maxNorm / norm (SFT's rule)
  t.is(
    (await clipByGlobalNorm({ a: tf.tensor1d([3]), b: tf.tensor1d([0, 4]) }, 1, 0)).grads.a!.dataSync()[0]!,
    f(3 * (1 / 5)),
  );
  const small = await clipByGlobalNorm({ a: tf.tensor1d([0.3]) }, 1);
  near(t, small.grads.a!.dataSync()[0]!, 0.3);
  t.false(Number.isFinite((await clipByGlobalNorm({ a: tf.tensor1d([NaN]) }, 1)).norm));
  await t.throwsAsync(clipByGlobalNorm({}, 0), { instanceOf: OptimizerError });
});

test.serial('minimize: a non-finite loss throws and leaves weights, moments and step count alone', async (t) => {
  const vs = vars();
  const opt = new AdamW(vs, { lr: 0.1, clipNorm: 1 });
  const before = Array.from(vs[0]!.dataSync());
  const tensors = tf.memory().numTensors;
  const nan = () => opt.minimize(() => tf.sum(tf.mul(vs[0]!, NaN)) as tf.Scalar);
  await t.throwsAsync(nan, { instanceOf: OptimizerError, message: /non-finite/ });
  t.is(tf.memory().numTensors, tensors);
  t.deepEqual(Array.from(vs[0]!.dataSync()), before);
  t.is(opt.steps, 0);
  const stats = await opt.minimize(() => tf.sum(tf.mul(vs[0]!, 3)) as tf.Scalar);
  near(t, stats.gradNorm, 6);
  t.is(stats.step, 1);
  t.is(tf.memory().numTensors, tensors);
  tf.dispose(vs);
  opt.dispose();
});

test('save/load restores the state bit for bit, in the checkpoint format (adamw.json, adamw.bin)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'adamw-'));
  const [a, b] = [vars(), vars()];
  const oa = new AdamW(a, { lr: 0.05, weightDecay: 0.1 });
  const ob = new AdamW(b, { lr: 0.05, weightDecay: 0.1 });
  const grads = (vs: tf.Variable[], i: number) =>
    gradsOf(
      vs,
      [
        [0.1 * i, -0.2],
        [0.3, 1],
      ],
      [0.5, -i],
    );
  for (let i = 0; i < 3; i++) {
    const g = grads(a, i);
    oa.step(g);
    tf.dispose(Object.values(g));
  }
  await oa.save(dir);
  const manifest = JSON.parse(readFileSync(join(dir, 'adamw.json'), 'utf8'));
  const shapes = [
    { name: a[0]!.name, shape: [2, 2] },
    { name: a[1]!.name, shape: [2] },
  ];
  t.deepEqual(manifest, { t: 3, lr: 0.05, vars: shapes });
  t.is(readFileSync(join(dir, 'adamw.bin')).length, 2 * 6 * 4);
  // b takes a's weights and optimizer state; the next updates then match exactly
  b.forEach((v, i) => v.assign(a[i]!));
  await ob.load(dir);
  t.is(ob.steps, 3);
  for (let i = 3; i < 5; i++) {
    const ga = grads(a, i);
    const gb = grads(b, i);
    oa.step(ga);
    ob.step(gb);
    tf.dispose([...Object.values(ga), ...Object.values(gb)]);
  }
  a.forEach((v, i) => t.deepEqual(Array.from(v.dataSync()), Array.from(b[i]!.dataSync())));
  // a state written before (same files) saves back byte for byte
  const bin = readFileSync(join(dir, 'adamw.bin'));
  writeFileSync(join(dir, 'adamw.json'), JSON.stringify({ ...manifest, t: 7 }));
  const oc = new AdamW(a, { lr: 0.05 });
  await oc.load(dir);
  await oc.save(dir);
  t.deepEqual(readFileSync(join(dir, 'adamw.bin')), bin);
  t.is(JSON.parse(readFileSync(join(dir, 'adamw.json'), 'utf8')).t, 7);
  // a state for other variables is refused
  const od = new AdamW([a[0]!], { lr: 0.05 });
  await t.throwsAsync(() => od.load(dir), { instanceOf: OptimizerError, message: /2 variables, the model 1/ });
  for (const o of [oa, ob, oc, od]) o.dispose();
  tf.dispose([...a, ...b]);
  rmSync(dir, { recursive: true, force: true });
});

test('bad options are clear errors', (t) => {
  t.throws(() => new AdamW([], { lr: 0 }), { instanceOf: OptimizerError, message: /learning rate/ });
  const schedule = (totalSteps: number, warmupSteps: number) =>
    new AdamW([], { lr: 1, schedule: { totalSteps, warmupSteps } });
  t.throws(() => schedule(0, 0), { instanceOf: OptimizerError, message: /totalSteps/ });
  t.throws(() => schedule(10, -1), { instanceOf: OptimizerError, message: /warmupSteps/ });
});
