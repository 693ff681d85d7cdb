import test from 'ava';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { buildStepTrajectories, buildTrajectory, type TrainingSequence } from '../../src/policy/trajectory.ts';
import { resolveConfig, type TrainConfig } from '../../src/rl/config.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { computeAdvantages } from '../../src/rl/advantages.ts';
import { batchAdvantages } from '../../src/rl/update/advantages.ts';
import { rlMicroGradient, type RlMicroJob } from '../../src/rl/update/minibatch.ts';
import { padLength } from '../../src/rl/update/score.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { call, toyScenario } from '../helpers/toy-scenario.ts';

const tokenizer = trainTokenizer(
  [
    'toy say 42 <answer>42</answer>',
    call('echo', { text: 'hi' }),
    call('roll', {}),
    'Error: invalid action. Call a tool or answer.',
  ],
  { vocabSize: 15 + 256 + 60 },
);

/** Three sampled episodes of one task (a GRPO group) from a real, tiny GPT that tokenizes. */
async function episodes() {
  await initBackend('wasm');
  const model = await GptTrainable.create(
    new GPTModel(
      {
        vocabSize: tokenizer.vocabSize,
        dModel: 16,
        nLayers: 2,
        nHeads: 2,
        contextLength: 1024,
        dMlp: 32,
        copyHead: true,
      },
      11,
    ),
    tokenizer,
  );
  const scenario = toyScenario({ maxTurns: 3, maxTokensPerTurn: 8 });
  const { records } = await rollout({
    scenario,
    policy: model.policy({ temperature: 1 }),
    split: 'train',
    episodes: 3,
    group: 3,
    seed: 4,
  });
  // The untrained model's episodes all fail alike; give them distinct process rewards and outcomes,
  // so that the group's advantages (and so the gradients) are not zero.
  records.forEach((r, k) => {
    r.turns.forEach((turn, i) => (turn.reward = 0.1 * (k + 1) * (i + 1)));
    r.outcome = { ...r.outcome, reward: k % 2 };
  });
  return { model, records };
}

/** The loss and gradient of a batch's policy-gradient term, as the trainer computes them. */
async function lossAndGradient(
  model: GptTrainable,
  config: TrainConfig,
  seqs: TrainingSequence[],
  denominator: number,
) {
  const advantages = batchAdvantages(
    seqs,
    seqs.map((s) => s.rewards),
    null,
    config,
  );
  const rows = seqs.map((s) => s.tokens);
  const job: RlMicroJob = {
    config,
    rows,
    length: padLength(rows, model.maxLength),
    masks: seqs.map((s) => s.mask),
    advantages: advantages.map((a) => a.advantages),
    oldLogprobs: seqs.map((s) => s.sampleLogprobs),
    refLogprobs: null,
    returns: null,
    oldValues: null,
    valueMasks: null,
    denominator,
    valueDenominator: denominator,
    pad: tokenizer.pad,
  };
  const { grads, stats } = await rlMicroGradient(model, model.variables, job);
  return { loss: stats.loss!, grads: Array.from(grads) };
}

test('concatenation is a special case: step-level samples of a concatenated episode give the paper path’s loss and gradients', async (t) => {
  const { model, records } = await episodes();
  t.true(
    records.some((r) => r.turns.length > 1),
    'multi-turn episodes',
  );
  const paper = records.map(buildTrajectory);
  const steps = records.flatMap(buildStepTrajectories);
  t.is(
    steps.length,
    records.reduce((n, r) => n + r.turns.filter((x) => x.tokens!.length > 0).length, 0),
  );
  // Each step's sample is the episode's sequence cut after the step's action, its loss on that action only.
  for (const s of steps) {
    const whole = paper.find((p) => p.episodeId === s.episodeId)!;
    t.deepEqual(s.tokens, whole.tokens.slice(0, s.tokens.length));
    const own = s.mask.map((m, i) => (i >= s.promptLength ? m : 0));
    t.deepEqual(s.mask, own);
    t.deepEqual(s.mask.slice(s.promptLength), whole.mask.slice(s.promptLength, s.tokens.length));
  }
  const tokens = paper.reduce((n, p) => n + p.mask.reduce((a, b) => a + b, 0), 0);
  for (const algo of ['grpo', 'rloo'] as const) {
    for (const [aggregation, denominator] of [
      ['seq-mean-token-sum', records.length], // the sum over tokens, per episode
      ['token-mean', tokens],
    ] as const) {
      const config = resolveConfig({
        algo,
        seed: 1,
        aggregation,
        klMode: 'none',
        klCoef: 0,
        entropyCoef: 0,
      });
      const a = await lossAndGradient(model, config, paper, denominator);
      const b = await lossAndGradient(model, config, steps, denominator);
      const scale = Math.max(1e-6, ...a.grads.map(Math.abs));
      const worst = Math.max(...a.grads.map((g, i) => Math.abs(g - b.grads[i]!)));
      t.true(
        Math.abs(a.loss - b.loss) <= 1e-5 * Math.max(1, Math.abs(a.loss)),
        `${algo} ${aggregation}: loss ${a.loss} vs ${b.loss}`,
      );
      t.true(worst <= 1e-4 * scale, `${algo} ${aggregation}: gradient differs by ${worst} (largest ${scale})`);
      t.true(scale > 1e-6, 'a gradient to compare');
    }
  }
});

test('REINFORCE++ without whitening and γ = 1: each step’s return is what the paper path gives its tokens', async (t) => {
  const { records } = await episodes();
  const paper = records.map(buildTrajectory);
  const steps = records.flatMap(buildStepTrajectories);
  const a = computeAdvantages('reinforce++', paper, { gamma: 1, whiten: false });
  const b = computeAdvantages(
    'reinforce++',
    steps.map((s) => ({ ...s, episode: s.episodeId })),
    { gamma: 1, whiten: false },
  );
  steps.forEach((s, i) => {
    const whole = a[paper.findIndex((p) => p.episodeId === s.episodeId)]!.advantages;
    s.mask.forEach((m, k) => {
      if (m === 1)
        t.true(Math.abs(b[i]!.advantages[k]! - whole[k]!) < 1e-12, `${s.episodeId} step ${s.step} token ${k}`);
    });
  });
});
