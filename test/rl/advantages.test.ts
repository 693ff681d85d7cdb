import test from 'ava';
import fc from 'fast-check';
import { computeAdvantages, type AdvantageSequence } from '../../src/rl/advantages.ts';
import { RlInputError } from '../../src/rl/errors.ts';

const close = (t: any, actual: readonly number[], expected: readonly number[], eps = 1e-9) => {
  t.is(actual.length, expected.length);
  actual.forEach((a, i) => t.true(Math.abs(a - expected[i]!) < eps, `index ${i}: ${a} vs ${expected[i]}`));
};

// [prompt][a1 a2][obs obs][a3]: the first action gets a process reward 0.5 on its last token, the outcome 1 sits on a3.
const twoTurns: AdvantageSequence = {
  rewards: [0, 0, 0.5, 0, 0, 1],
  mask: [0, 1, 1, 0, 0, 1],
  values: [0, 0.1, 0.2, 9, 9, 0.3],
};

test('gae skips observation tokens and bootstraps across them (γ = λ = 1)', (t) => {
  const [r] = computeAdvantages('gae', [twoTurns], { whiten: false });
  // t=5: δ = 1 − 0.3 = 0.7; t=2: δ = 0.5 + 0.3 − 0.2 = 0.6, A = 1.3; t=1: δ = 0.2 − 0.1 = 0.1, A = 1.4.
  close(t, r!.advantages, [0, 1.4, 1.3, 0, 0, 0.7]);
  close(t, r!.returns!, [0, 1.5, 1.5, 0, 0, 1.0]);
});

test('gae with γ = 0.9, λ = 0.5 (hand-computed)', (t) => {
  const [r] = computeAdvantages('gae', [twoTurns], { gamma: 0.9, lambda: 0.5, whiten: false });
  // t=5: 0.7; t=2: δ = 0.5 + 0.27 − 0.2 = 0.57, A = 0.57 + 0.45·0.7 = 0.885; t=1: δ = 0.18 − 0.1 = 0.08, A = 0.08 + 0.45·0.885.
  close(t, r!.advantages, [0, 0.08 + 0.45 * 0.885, 0.885, 0, 0, 0.7]);
  close(t, r!.returns!, [0, 0.08 + 0.45 * 0.885 + 0.1, 1.085, 0, 0, 1.0]);
});

test('gae whitens over every action token of the batch with the unbiased variance', (t) => {
  const [r] = computeAdvantages('gae', [twoTurns]);
  const raw = [1.4, 1.3, 0.7];
  const mean = (1.4 + 1.3 + 0.7) / 3;
  const variance = raw.reduce((a, x) => a + (x - mean) ** 2, 0) / 2;
  const w = raw.map((x) => (x - mean) / Math.sqrt(variance + 1e-8));
  close(t, r!.advantages, [0, w[0]!, w[1]!, 0, 0, w[2]!]);
  // returns are not whitened
  close(t, r!.returns!, [0, 1.5, 1.5, 0, 0, 1.0]);
});

/** verl's compute_gae_advantage_return, ported literally (masked carry of nextvalues and lastgaelam). */
function verlGae(s: AdvantageSequence, gamma: number, lam: number): number[] {
  let nextValues = 0;
  let lastGae = 0;
  const out = new Array(s.mask.length).fill(0);
  for (let t = s.mask.length - 1; t >= 0; t--) {
    const delta = s.rewards[t]! + gamma * nextValues - s.values![t]!;
    const lastGae_ = delta + gamma * lam * lastGae;
    nextValues = s.values![t]! * s.mask[t]! + (1 - s.mask[t]!) * nextValues;
    lastGae = lastGae_ * s.mask[t]! + (1 - s.mask[t]!) * lastGae;
    out[t] = lastGae * s.mask[t]!;
  }
  return out;
}

test('gae equals verl’s masked recursion on random multi-turn sequences', (t) => {
  const token = fc.record({
    m: fc.constantFrom(0, 1),
    r: fc.double({ min: -1, max: 1, noNaN: true }),
    v: fc.double({ min: -1, max: 1, noNaN: true }),
  });
  fc.assert(
    fc.property(
      fc.array(token, { minLength: 1, maxLength: 30 }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      (tokens, gamma, lam) => {
        const s: AdvantageSequence = {
          mask: tokens.map((x) => x.m),
          rewards: tokens.map((x) => (x.m ? x.r : 0)),
          values: tokens.map((x) => x.v),
        };
        const [r] = computeAdvantages('gae', [s], { gamma, lambda: lam, whiten: false });
        const expected = verlGae(s, gamma, lam);
        return r!.advantages.every((a, i) => Math.abs(a - expected[i]!) < 1e-9);
      },
    ),
  );
  t.pass();
});

test('reinforce++ return-to-go runs over action tokens as if contiguous', (t) => {
  const [r] = computeAdvantages('reinforce++', [twoTurns], { gamma: 0.9, whiten: false });
  // t=5: 1; t=2: 0.5 + 0.9·1 = 1.4; t=1: 0.9·1.4 = 1.26. (verl's reset at mask 0 would give 0.5 and 0.45.)
  close(t, r!.returns!, [0, 1.26, 1.4, 0, 0, 1]);
  close(t, r!.advantages, [0, 1.26, 1.4, 0, 0, 1]);
});

test('reinforce++ whitens over the whole batch', (t) => {
  const b: AdvantageSequence = { rewards: [0, 0, 0], mask: [0, 1, 1] };
  const [r1, r2] = computeAdvantages('reinforce++', [twoTurns, b], { gamma: 1 });
  const raw = [1.5, 1.5, 1, 0, 0];
  const mean = 4 / 5;
  const sd = Math.sqrt(raw.reduce((a, x) => a + (x - mean) ** 2, 0) / 4 + 1e-8);
  close(t, r1!.advantages, [0, 0.7 / sd, 0.7 / sd, 0, 0, 0.2 / sd]);
  close(t, r2!.advantages, [0, -0.8 / sd, -0.8 / sd]);
});

const seq = (score: number, group: string, obs = false): AdvantageSequence => ({
  // the score split into a process reward on the first action and the outcome on the last
  rewards: obs ? [0, score / 2, 0, score / 2] : [0, 0, score],
  mask: obs ? [0, 1, 0, 1] : [0, 1, 1],
  group,
});

test('grpo normalizes the summed reward within each group (unbiased std) and broadcasts over action tokens', (t) => {
  const rs = computeAdvantages('grpo', [seq(1, 'a', true), seq(0, 'a'), seq(0.5, 'a'), seq(2, 'b')]);
  // group a: mean 0.5, std sqrt((0.25 + 0.25 + 0) / 2) = 0.5
  const a = 0.5 / (0.5 + 1e-6);
  close(t, rs[0]!.advantages, [0, a, 0, a]);
  close(t, rs[1]!.advantages, [0, -a, -a]);
  close(t, rs[2]!.advantages, [0, 0, 0]);
  // a group of one: mean 0, std 1
  close(t, rs[3]!.advantages, [0, 2 / (1 + 1e-6), 2 / (1 + 1e-6)]);
  t.is(rs[0]!.returns, undefined);
});

test('grpo: identical rewards in a group give zero advantages', (t) => {
  const rs = computeAdvantages('grpo', [seq(1, 'g'), seq(1, 'g', true), seq(1, 'g')]);
  for (const r of rs) t.true(r.advantages.every((x) => x === 0));
  const rl = computeAdvantages('rloo', [seq(1, 'g'), seq(1, 'g', true)]);
  for (const r of rl) t.true(r.advantages.every((x) => x === 0));
});

test('grpo with normByStd false is x − mean (Dr. GRPO)', (t) => {
  const rs = computeAdvantages('grpo', [seq(1, 'a'), seq(0, 'a'), seq(0.5, 'a')], { normByStd: false });
  close(t, rs[0]!.advantages, [0, 0.5, 0.5]);
  close(t, rs[1]!.advantages, [0, -0.5, -0.5]);
  close(t, rs[2]!.advantages, [0, 0, 0]);
});

test('rloo subtracts the mean of the other members; a group of one keeps its score', (t) => {
  const rs = computeAdvantages('rloo', [seq(1, 'a', true), seq(0, 'a'), seq(0.5, 'a'), seq(2, 'b')]);
  close(t, rs[0]!.advantages, [0, 0.75, 0, 0.75]);
  close(t, rs[1]!.advantages, [0, -0.75, -0.75]);
  close(t, rs[2]!.advantages, [0, 0, 0]);
  close(t, rs[3]!.advantages, [0, 2, 2]);
  // verl's form: s·n/(n−1) − μ·n/(n−1)
  close(t, [rs[0]!.advantages[1]!], [1 * 1.5 - 0.5 * 1.5]);
});

test('bad input gets clear errors', (t) => {
  const e = (f: () => unknown, re: RegExp) => t.regex(t.throws(f, { instanceOf: RlInputError })!.message, re);
  e(() => computeAdvantages('ppo' as any, []), /unknown advantage estimator "ppo"/);
  e(() => computeAdvantages('grpo', [{ rewards: [0, 1], mask: [1] }]), /rewards has 2 tokens but mask has 1/);
  e(() => computeAdvantages('grpo', [{ rewards: [0, 1], mask: [1, 2], group: 'a' }]), /mask\[1\] is 2/);
  e(() => computeAdvantages('grpo', [{ rewards: [1, 0], mask: [0, 1], group: 'a' }]), /not an action token/);
  e(() => computeAdvantages('grpo', [{ rewards: [0, NaN], mask: [1, 1], group: 'a' }]), /finite number/);
  e(() => computeAdvantages('grpo', [{ rewards: [0, 1], mask: [1, 1] }]), /needs a group key/);
  e(() => computeAdvantages('gae', [{ rewards: [0, 1], mask: [1, 1] }]), /gae needs values/);
  e(() => computeAdvantages('gae', [{ rewards: [0, 1], mask: [1, 1], values: [0] }]), /values has 1 tokens/);
  e(() => computeAdvantages('gae', [twoTurns], { gamma: 1.5 }), /gamma must be a number in \[0, 1\]/);
  e(() => computeAdvantages('reinforce++', [{ rewards: [1], mask: [1] }]), /at least 2 action tokens/);
  e(() => computeAdvantages('rloo', null as any), /must be an array/);
  // whiten: false makes a one-token batch fine
  t.deepEqual(computeAdvantages('reinforce++', [{ rewards: [1], mask: [1] }], { whiten: false })[0]!.advantages, [1]);
});

// Step-level samples (one sequence per step): episode e1 has 3 steps with step rewards 0.1, 0.2 and 1
// (the outcome on the last); e2 has 2 steps with rewards 0 and 0; both in group g. Each step: a prompt
// token, then its action tokens (two for the first step, one for the others).
const stepOf = (episode: string, step: number, reward: number, actionTokens = 1, group = 'g'): AdvantageSequence => {
  const mask = [0, ...new Array(actionTokens).fill(1)];
  const rewards = mask.map((_, i) => (i === mask.length - 1 ? reward : 0));
  return { rewards, mask, group, episode, step, valueAt: 0, values: mask.map(() => 0) };
};
const steps = (): AdvantageSequence[] => [
  stepOf('e1', 1, 0.2),
  stepOf('e2', 0, 0, 2),
  stepOf('e1', 0, 0.1, 2),
  stepOf('e1', 2, 1),
  stepOf('e2', 1, 0),
];

test('step-level GRPO and RLOO: the episode score, normalized in its group, on every step of the episode', (t) => {
  const seqs = steps();
  const grpo = computeAdvantages('grpo', seqs);
  // scores: e1 1.3, e2 0; mean 0.65, std (unbiased) = 1.3/√2.
  const z = 0.65 / (1.3 / Math.SQRT2 + 1e-6);
  const e = (i: number) => grpo[i]!.advantages.filter((_, k) => seqs[i]!.mask[k] === 1);
  for (const i of [0, 2, 3])
    close(
      t,
      e(i),
      e(i).map(() => z),
    );
  for (const i of [1, 4])
    close(
      t,
      e(i),
      e(i).map(() => -z),
    );
  close(t, grpo[1]!.advantages, [0, -z, -z]);
  const rloo = computeAdvantages('rloo', seqs);
  close(t, rloo[3]!.advantages, [0, 1.3]);
  close(t, rloo[4]!.advantages, [0, -1.3]);
  const dr = computeAdvantages('grpo', seqs, { normByStd: false });
  close(t, dr[2]!.advantages, [0, 0.65, 0.65]);
});

test('step-level REINFORCE++: each step gets its discounted return over the steps, whitened over steps', (t) => {
  const seqs = steps();
  const raw = computeAdvantages('reinforce++', seqs, { gamma: 0.5, whiten: false });
  // e1: G2 = 1, G1 = 0.2 + 0.5, G0 = 0.1 + 0.5·0.7 = 0.45; e2: 0, 0.
  close(t, raw[2]!.advantages, [0, 0.45, 0.45]);
  close(t, raw[0]!.advantages, [0, 0.7]);
  close(t, raw[3]!.advantages, [0, 1]);
  close(t, raw[1]!.advantages, [0, 0, 0]);
  const whitened = computeAdvantages('reinforce++', seqs, { gamma: 0.5 });
  // Over the five steps, each once: the first step's two tokens do not count twice.
  const g = [0.7, 0, 0.45, 1, 0];
  const mean = g.reduce((a, b) => a + b, 0) / 5;
  const sd = Math.sqrt(g.reduce((a, x) => a + (x - mean) ** 2, 0) / 4 + 1e-8);
  close(t, whitened[2]!.advantages, [0, (0.45 - mean) / sd, (0.45 - mean) / sd]);
  close(t, whitened[4]!.advantages, [0, (0 - mean) / sd]);
});

test('step-level GAE: over steps, with each step state value at its last prompt token', (t) => {
  const seqs = steps();
  // State values V(e1 step k) = 0.1, 0.2, 0.3 and V(e2 step k) = 0.5, 0.4, at valueAt = 0.
  const values: { [key: string]: number } = { 'e1:0': 0.1, 'e1:1': 0.2, 'e1:2': 0.3, 'e2:0': 0.5, 'e2:1': 0.4 };
  for (const s of seqs) s.values = s.mask.map((_, k) => (k === 0 ? values[`${s.episode}:${s.step}`]! : 9));
  const [a1, a0, b0, a2, b1] = [0, 2, 1, 3, 4].map(
    (i) => computeAdvantages('gae', seqs, { gamma: 0.9, lambda: 0.5, whiten: false })[i]!,
  );
  // e1: δ2 = 1 − 0.3 = 0.7, A2 = 0.7; δ1 = 0.2 + 0.9·0.3 − 0.2 = 0.27, A1 = 0.27 + 0.45·0.7 = 0.585;
  //     δ0 = 0.1 + 0.9·0.2 − 0.1 = 0.18, A0 = 0.18 + 0.45·0.585.
  close(t, a2!.advantages, [0, 0.7]);
  close(t, a1!.advantages, [0, 0.585]);
  close(t, a0!.advantages, [0, 0.18 + 0.45 * 0.585, 0.18 + 0.45 * 0.585]);
  // The value target sits on the state token only: R = A + V.
  close(t, a1!.returns!, [0.585 + 0.2, 0]);
  t.deepEqual(a1!.valueMask, [1, 0]);
  // e2: δ1 = 0 − 0.4, δ0 = 0 + 0.9·0.4 − 0.5 = −0.14, A0 = −0.14 + 0.45·(−0.4) = −0.32.
  close(t, b1!.advantages, [0, -0.4]);
  close(t, b0!.advantages, [0, -0.32, -0.32]);
});

test('step-level samples are checked: a missing step, a duplicate step, a mixed batch, GAE without valueAt', (t) => {
  const bad = (seqs: AdvantageSequence[], estimator: 'grpo' | 'gae', pattern: RegExp) =>
    t.regex(t.throws(() => computeAdvantages(estimator, seqs), { instanceOf: RlInputError })!.message, pattern);
  bad([{ ...stepOf('e1', 0, 1), step: undefined }], 'grpo', /needs an episode key .* and a step index/);
  bad([stepOf('e1', 0, 1), stepOf('e1', 0, 1)], 'grpo', /two samples of step 0/);
  bad([stepOf('e1', 0, 1), { rewards: [0, 1], mask: [0, 1], group: 'g' }], 'grpo', /mix none/);
  bad([{ ...stepOf('e1', 0, 1), valueAt: undefined }], 'gae', /step-level gae needs valueAt/);
  bad([stepOf('e1', 0, 1), stepOf('e1', 1, 1, 1, 'other')], 'grpo', /steps in different groups/);
});
