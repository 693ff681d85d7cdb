/**
 * Data-parallel training on real replica threads (slow: each pool starts tsx in every thread, and
 * each test trains tiny models several times over): bit-identical weights whatever the number of
 * threads, a replica that dies, an error in one. The fast checks of how many threads are taken are
 * train-threads.test.ts.
 */
import test from 'ava';
import { builtinScenarios } from '../../scenarios/index.ts';
import { resolvePolicy } from '../../src/app/resolve-policy.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { createRng } from '../../src/core/rng.ts';
import { AdamW } from '../../src/policy/tfjs/adamw.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { modelHash } from '../../src/policy/tfjs/checkpoint.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import { recordTexts, trainSft } from '../../src/policy/tfjs/sft.ts';
import { trainTokenizer, type Tokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import type { TrainingSequence } from '../../src/policy/trajectory.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { ReplicaError, TrainThreads } from '../../src/rl/train-threads.ts';
import { updateOnBatch } from '../../src/rl/update/update.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';

// Replicas start from the TypeScript sources here (tsx in each thread: seconds); one pool per size,
// shared by the tests, which run one at a time so that each has the cores.
const pools: { two?: TrainThreads; three?: TrainThreads } = {};
let records: EpisodeRecord[] = [];
let sftTokenizer: Tokenizer;

test.before(async () => {
  await initBackend('wasm');
  pools.two = new TrainThreads({ threads: 2, backend: 'wasm' });
  pools.three = new TrainThreads({ threads: 3, backend: 'wasm' });
  // start both pools' threads now, side by side
  const model = new GPTModel({ vocabSize: 50, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 16, dMlp: 16 }, 1);
  const job = { tokens: [[1, 2, 3]], masks: [[0, 1, 1]], pad: 0, denominator: 2 };
  await Promise.all([
    pools.two.gradients(model, 'sft', [job, job]),
    pools.three.gradients(model, 'sft', [job, job, job]),
  ]);
  model.dispose();
  const scenario = await loadScenario('calculator', builtinScenarios);
  const expert = await resolvePolicy('expert', scenario, 0);
  records = (await rollout({ scenario, policy: expert, split: 'train', episodes: 8, seed: 2 })).records;
  sftTokenizer = trainTokenizer(recordTexts(records), { vocabSize: 300, chunking: 'words' });
});

test.after.always(async () => {
  await pools.two?.close();
  await pools.three?.close();
});

/** A few SFT steps of a tiny model with a copy head; its content hash. */
async function sft(replicas?: TrainThreads): Promise<{ hash: string; losses: number[] }> {
  const losses: number[] = [];
  const r = await trainSft({
    records,
    seed: 4,
    tokenizer: sftTokenizer,
    model: { dModel: 16, nLayers: 1, nHeads: 2, contextLength: 1024, copyHead: true },
    steps: 3,
    batchSize: 4,
    lr: 1e-2,
    replicas,
    onStep: (s) => losses.push(s.loss),
  });
  const hash = await modelHash(r.model, r.tokenizer);
  r.model.dispose();
  return { hash, losses };
}

test.serial('SFT: the weights after 3 steps are bit-identical with 1, 2 and 3 training threads', async (t) => {
  t.timeout(2 * 60_000);
  const one = await sft();
  t.deepEqual(await sft(pools.two), one);
  t.deepEqual(await sft(pools.three), one);
  t.true(one.losses.every(Number.isFinite));
});

const tokenizer = trainTokenizer(['search the answer for the quick brown fox', '<answer>yes</answer>'], {
  vocabSize: 300,
  chunking: 'words',
});

/** Twelve sequences in three groups, with rewards, as a rollout would give (fixed by a seed). */
function sequences(): TrainingSequence[] {
  const rng = createRng(3);
  return Array.from({ length: 12 }, (_, i) => {
    const n = 20 + Math.floor(rng.next() * 30);
    const tokens = Array.from({ length: n }, () => 1 + Math.floor(rng.next() * (tokenizer.vocabSize - 1)));
    const mask = tokens.map((_, k) => (k > 5 && k % 3 !== 0 ? 1 : 0));
    const rewards = tokens.map(() => 0);
    const reward = rng.next() < 0.5 ? 1 : 0;
    rewards[mask.lastIndexOf(1)] = reward;
    return {
      episodeId: `e${i}`,
      group: `g${i % 3}`,
      sample: i,
      tokens,
      mask,
      rewards,
      sampleLogprobs: tokens.map(() => 0),
      promptLength: 5,
      totalReward: reward,
      success: reward > 0,
      metrics: {},
      policyVersion: '',
    };
  });
}

/**
 * Two GRPO updates of a GPT with a copy head (KL loss to a frozen reference, 2 epochs of 2
 * minibatches, 3 micro-batches each); the weights' hash and the metrics.
 */
async function grpo(replicas?: TrainThreads): Promise<{ version: string; metrics: unknown[] }> {
  const config = { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 64 };
  const model = await GptTrainable.create(new GPTModel({ ...config, dMlp: 64, copyHead: true }, 7), tokenizer);
  const ref = await model.freeze();
  const rl = resolveConfig({ algo: 'grpo', seed: 1, minibatch: 6, microbatch: 2, epochs: 2, lr: 1e-2 });
  const opt = new AdamW(model.variables, { lr: rl.lr });
  const metrics: unknown[] = [];
  const seqs = sequences();
  for (let step = 0; step < 2; step++) metrics.push(await updateOnBatch(model, ref, opt, rl, seqs, step, { replicas }));
  const version = model.version();
  ref.dispose();
  opt.dispose();
  model.model.dispose();
  return { version, metrics };
}

test.serial(
  'GRPO with the copy head: the weights after two steps are bit-identical with 1, 2 and 3 threads',
  async (t) => {
    t.timeout(2 * 60_000);
    const one = await grpo();
    t.deepEqual(await grpo(pools.two), one);
    t.deepEqual(await grpo(pools.three), one);
    t.is(pools.two!.crashes + pools.three!.crashes, 0);
  },
);

test.serial('a replica that dies mid-step is replaced and its micro-batch recomputed: the same weights', async (t) => {
  t.timeout(2 * 60_000);
  const one = await grpo();
  const pool = pools.two!;
  // the run's 3rd optimizer step, its second micro-batch
  pool.crashAt = { call: pool.calls + 2, job: 1 };
  const crashes = pool.crashes;
  t.deepEqual(await grpo(pool), one);
  t.is(pool.crashes, crashes + 1);
});

test.serial('an error in a replica is the step’s error, not retried', async (t) => {
  t.timeout(2 * 60_000);
  const crashes = pools.two!.crashes;
  const model = new GPTModel({ vocabSize: 50, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 16, dMlp: 16 }, 1);
  const job = { tokens: [[1, 2, 3]], masks: [[0, 1, 1]], pad: 0, denominator: 2 };
  await t.throwsAsync(() => pools.two!.gradients(model, 'dpo', [job]), {
    instanceOf: ReplicaError,
    message: /micro-batch 0 failed in a replica: unknown training job kind "dpo"/,
  });
  t.is(pools.two!.crashes, crashes);
  model.dispose();
});
