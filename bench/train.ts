/**
 * Training benchmark (not a test): SFT and RL-update tokens/s of the main job's model with its
 * gradients computed on 1 thread (this one) and on N training threads (TrainThreads: a replica of
 * the model per thread), next to the backend's own single-thread 2-D matmul rate and the model's
 * FLOP rate, per thread as a share of that matmul rate. Checks that the weights come out
 * bit-identical whatever the number of threads.
 *
 *   npx tsx --conditions=source bench/train.ts [--json] [--threads 1,2] [--sft-steps 30] [--rl-steps 4] [--warmup-steps 10] [--matmul-size 512]
 *
 * Data: the main job's warm-start demonstrations (multihop-qa, noisy expert, seed 1). SFT: the main
 * job's batch (8 sequences, micro-batches of 1). RL update: one GRPO step of the main job (64
 * sequences, minibatch 64, micro-batches of 8; klMode none) on those sequences with seeded rewards.
 * The first step of each row warms up (threads start, code compiles) and is not timed.
 */
import { availableParallelism, cpus, loadavg } from 'node:os';
import { Command } from 'commander';
import * as tf from '@tensorflow/tfjs';
import { builtinScenarios } from '../scenarios/index.ts';
import { resolvePolicy } from '../src/app/resolve-policy.ts';
import { startBudget, startScenarioOptions } from '../src/app/start.ts';
import { createRng } from '../src/core/rng.ts';
import { AdamW } from '../src/policy/tfjs/adamw.ts';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import { chatEncoding } from '../src/policy/tfjs/chat-template.ts';
import { modelHash } from '../src/policy/tfjs/checkpoint.ts';
import type { GradientExecutor } from '../src/policy/tfjs/data-parallel.ts';
import { DEFAULT_MODEL_CONFIG, type ModelConfig } from '../src/architectures/gpt/model-config.ts';
import { GPTModel } from '../src/architectures/gpt/model.ts';
import { recordTexts, sequencesFromRecords, trainSft } from '../src/policy/tfjs/sft.ts';
import { trainTokenizer } from '../src/policy/tfjs/tokenizer.ts';
import type { TokenSequence, TrainingSequence } from '../src/policy/trajectory.ts';
import { resolveConfig } from '../src/rl/config.ts';
import { GptTrainable } from '../src/rl/tfjs-trainable.ts';
import { TrainThreads } from '../src/rl/train-threads.ts';
import { updateOnBatch } from '../src/rl/update/update.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { loadScenario } from '../src/scenario/load.ts';

const flags = new Command()
  .option('--threads <list>', 'training threads to compare (1: this thread only)', '1,2')
  .option('--episodes <n>', 'demonstrations (the data)', Number, 128)
  .option('--sft-steps <n>', 'SFT steps timed per row (after the warm-up steps)', Number, 30)
  .option('--rl-steps <n>', 'RL update steps timed per row (after one warm-up step)', Number, 4)
  // The first steps of a thread grow its wasm heap (fresh pages: kernel time) and warm the JIT; the
  // main job runs 1320 steps, so its rate is the one after them.
  .option('--warmup-steps <n>', 'SFT steps run before the timed ones', Number, 10)
  .option('--rl-sequences <n>', 'sequences per RL step (the main job: 64)', Number)
  .option('--backend <name>', 'tfjs backend (default: the best that loads)')
  .option('--d-model <n>', 'model width (default: the main job’s)', Number)
  .option('--layers <n>', 'transformer layers (default: the main job’s)', Number)
  .option('--matmul-size <n>', 'side of the reference matmul (a GPU needs ~2048 to reach its rate)', Number, 512)
  .option('--json', 'print the figures as one JSON object')
  .parse()
  .opts<{
    threads: string;
    episodes: number;
    sftSteps: number;
    rlSteps: number;
    warmupSteps: number;
    rlSequences?: number;
    backend?: string;
    matmulSize: number;
    dModel?: number;
    layers?: number;
    json?: boolean;
  }>();

if (!(Number.isInteger(flags.warmupSteps) && flags.warmupSteps >= 1))
  throw new Error(`--warmup-steps must be an integer ≥ 1, got ${flags.warmupSteps}`);
const backend = await initBackend(flags.backend);
const threadCounts = flags.threads.split(',').map(Number);
const budget = startBudget(false);
const ws = budget.warmStart;
const seed = 1;

// --- data: the main job's demonstrations, tokenized as its warm start does -----------------------
const scenario = await loadScenario('multihop-qa', builtinScenarios, {
  seed: String(seed),
  ...startScenarioOptions(false),
});
const demo = await resolvePolicy(ws.demoPolicy, scenario, seed);
const { records } = await rollout({
  scenario,
  policy: demo,
  split: 'train',
  episodes: flags.episodes,
  seed: 7,
  concurrency: 16,
  config: budget.episode,
});
const tokenizer = trainTokenizer(recordTexts(records), { vocabSize: ws.vocabSize ?? 768, chunking: 'words' });
// The main job's model unless --d-model / --layers make it smaller (a software GPU is ~15× slower).
const modelOptions = {
  ...(ws.model ?? {}),
  ...(flags.dModel ? { dModel: flags.dModel, dMlp: 4 * flags.dModel } : {}),
  ...(flags.layers ? { nLayers: flags.layers } : {}),
};
// the config trainSft builds from these options
const config: ModelConfig = { ...DEFAULT_MODEL_CONFIG, ...modelOptions, vocabSize: tokenizer.vocabSize };
if (modelOptions.dModel && !modelOptions.dMlp) config.dMlp = 4 * config.dModel;
const probe = new GPTModel(config, 0);
const parameters = probe.parameterCount();
probe.dispose();
const sequences = sequencesFromRecords(records, chatEncoding(tokenizer), { contextLength: config.contextLength });

// --- FLOPs --------------------------------------------------------------------------------------
/**
 * Training FLOPs of one sequence of T tokens of which S are scored (the agent's): 3× the forward
 * pass (the backward pass is about twice the forward). Forward, as the model computes it: per token
 * the Q/K/V/O and MLP matmuls and the rotary mixes; per layer the full T×T attention (QKᵀ and AV,
 * causal by masking); the copy head's keys for every token; the output head, copy query and copy
 * attention for the S scored tokens only.
 */
function trainFlops(T: number, S: number): number {
  const { dModel: d, dMlp, nLayers: L, vocabSize: V } = config;
  const rotary = config.positions === 'rope' ? 2 * 2 * d * d : 0;
  const perToken = L * (2 * (4 * d * d + 2 * d * dMlp) + rotary);
  const attention = L * 2 * 2 * T * T * d;
  const copy = config.copyHead ? T * (2 * d * d + rotary / 2) + S * (2 * d * d + 2 * T * d + 2 * d) : 0;
  const head = S * 2 * d * V;
  return 3 * (T * perToken + attention + copy + head);
}
const scored = (s: TokenSequence) => s.mask.reduce((a, m, t) => a + (t > 0 ? m : 0), 0);

/** The backend's own single-thread 2-D matmul rate (n × n, --matmul-size), GFLOP/s, best of 5 after a warm-up. */
async function matmulGflops(): Promise<number> {
  const n = flags.matmulSize;
  const a = tf.randomNormal([n, n]);
  const b = tf.randomNormal([n, n]);
  const warm = tf.matMul(a, b);
  await warm.data();
  warm.dispose();
  let best = Infinity;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const c = tf.matMul(a, b);
    await c.data();
    best = Math.min(best, performance.now() - t0);
    c.dispose();
  }
  tf.dispose([a, b]);
  return (2 * n ** 3) / best / 1e6;
}

interface Row {
  phase: 'sft' | 'rl-update';
  threads: number;
  steps: number;
  seconds: number;
  tokens: number;
  tokensPerS: number;
  gflops: number;
  /** GFLOP/s per thread as a share of the backend's single-thread matmul rate. */
  perThreadOfMatmul: number;
  /** Speed-up over the first row of the same phase. */
  speedup: number;
  /** The weights' hash after the run (equal across threads). */
  weights: string;
}

const matmul = await matmulGflops();
const rows: Row[] = [];
const replicasFor = (threads: number) =>
  threads > 1 ? new TrainThreads({ threads, backend: backend.name }) : undefined;
const addRow = (r: Omit<Row, 'speedup' | 'perThreadOfMatmul' | 'tokensPerS' | 'gflops'> & { flops: number }) => {
  const first = rows.find((x) => x.phase === r.phase);
  const tokensPerS = r.tokens / r.seconds;
  const gflops = r.flops / r.seconds / 1e9;
  const { flops: _flops, ...rest } = r;
  rows.push({
    ...rest,
    tokensPerS,
    gflops,
    perThreadOfMatmul: gflops / r.threads / matmul,
    speedup: first ? tokensPerS / first.tokensPerS : 1,
  });
};

// --- SFT ----------------------------------------------------------------------------------------
const sftBatch = ws.batchSize ?? 8;
const sftFlopsPerToken =
  sequences.reduce((a, q) => a + trainFlops(q.tokens.length, scored(q)), 0) /
  sequences.reduce((a, q) => a + q.tokens.length, 0);
let sftModel: GPTModel | undefined;
for (const threads of threadCounts) {
  const replicas = replicasFor(threads);
  const marks: { t: number; tokens: number }[] = [];
  try {
    const r = await trainSft({
      records,
      tokenizer,
      onlySuccessful: false,
      model: modelOptions,
      seed,
      steps: flags.warmupSteps + flags.sftSteps,
      batchSize: sftBatch,
      lr: ws.lr,
      replicas,
      onStep: (s) => marks.push({ t: performance.now(), tokens: s.tokens }),
    });
    // FLOPs per token averaged over the data (batches are drawn uniformly from it), times the tokens
    const start = marks[flags.warmupSteps - 1]!;
    const tokens = marks.at(-1)!.tokens - start.tokens;
    const flops = tokens * sftFlopsPerToken;
    addRow({
      phase: 'sft',
      threads,
      steps: flags.sftSteps,
      seconds: (marks.at(-1)!.t - start.t) / 1000,
      tokens,
      flops,
      weights: (await modelHash(r.model, r.tokenizer)).slice(0, 16),
    });
    if (sftModel) r.model.dispose();
    else sftModel = r.model;
  } finally {
    await replicas?.close();
  }
}

// --- RL update ----------------------------------------------------------------------------------
const rl = resolveConfig({ ...budget.rl, algo: 'grpo', seed });
const perStep = flags.rlSequences ?? rl.tasksPerStep * rl.group;
const rng = createRng(3);
const rlSeqs: TrainingSequence[] = Array.from({ length: perStep }, (_, i) => {
  const s = sequences[i % sequences.length]!;
  const rewards = s.tokens.map(() => 0);
  const reward = rng.next() < 0.4 ? 1 : 0;
  rewards[s.mask.lastIndexOf(1)] = reward;
  return {
    ...s,
    episodeId: `e${i}`,
    group: `g${Math.floor(i / rl.group)}`,
    sample: i % rl.group,
    rewards,
    sampleLogprobs: s.tokens.map(() => 0),
    promptLength: s.mask.indexOf(1),
    totalReward: reward,
    success: reward > 0,
    metrics: {},
    policyVersion: '',
  };
});
const rlTokens = rlSeqs.reduce((a, s) => a + s.tokens.length, 0);
const rlFlops = rlSeqs.reduce((a, s) => a + trainFlops(s.tokens.length, scored(s)), 0);
const rlConfig = { ...rl, minibatch: Math.min(rl.minibatch, perStep) };
for (const threads of threadCounts) {
  const replicas: GradientExecutor | undefined = replicasFor(threads);
  const weights = new Map(sftModel!.namedWeights().map(([n, v]) => [n, v.clone() as tf.Tensor]));
  const model = await GptTrainable.create(new GPTModel(config, 0, weights), tokenizer);
  for (const t of weights.values()) t.dispose();
  const opt = new AdamW(model.variables, { lr: rl.lr });
  try {
    let t0 = 0;
    for (let step = 0; step <= flags.rlSteps; step++) {
      if (step === 1) t0 = performance.now();
      await updateOnBatch(model, null, opt, rlConfig, rlSeqs, step, { replicas });
    }
    const seconds = (performance.now() - t0) / 1000;
    addRow({
      phase: 'rl-update',
      threads,
      steps: flags.rlSteps,
      seconds,
      tokens: rlTokens * flags.rlSteps,
      flops: rlFlops * flags.rlSteps,
      weights: model.version().slice(0, 16),
    });
  } finally {
    opt.dispose();
    model.model.dispose();
    await (replicas as TrainThreads | undefined)?.close();
  }
}

const identical = (phase: Row['phase']) =>
  new Set(rows.filter((r) => r.phase === phase).map((r) => r.weights)).size === 1;
const result = {
  backend: backend.name,
  reason: backend.reason,
  cpu: cpus()[0]?.model ?? 'unknown',
  cores: availableParallelism(),
  load: loadavg()[0],
  model: { ...config, parameters },
  data: {
    demonstrations: records.length,
    meanTokens: sequences.reduce((a, s) => a + s.tokens.length, 0) / sequences.length,
    sftBatch,
    rlSequences: perStep,
    rlMicrobatch: rl.microbatch,
  },
  matmulGflops: matmul,
  rows,
  identicalWeights: { sft: identical('sft'), rl: identical('rl-update') },
};
if (flags.json) process.stdout.write(JSON.stringify(result) + '\n');
else {
  const f = (x: number, p = 0, w = 9) => x.toFixed(p).padStart(w);
  process.stdout.write(
    `backend ${backend.name}; ${result.cpu}, ${result.cores} cores, load ${result.load.toFixed(1)}; model d=${config.dModel} ` +
      `L=${config.nLayers} V=${config.vocabSize} T≤${config.contextLength}${config.copyHead ? ' copy head' : ''} ` +
      `(${parameters} parameters); mean sequence ${result.data.meanTokens.toFixed(0)} tokens; ` +
      `backend 2-D matmul ${matmul.toFixed(1)} GFLOP/s (one thread)\n\n` +
      ' phase     | threads |  tokens/s | speed-up | GFLOP/s | per thread, of matmul | weights\n' +
      '-----------|--------:|----------:|---------:|--------:|----------------------:|------------------\n' +
      rows
        .map(
          (r) =>
            `${r.phase.padEnd(10)} |${f(r.threads, 0, 8)} |${f(r.tokensPerS, 0, 10)} |${f(r.speedup, 2, 8)}× |` +
            `${f(r.gflops, 2, 8)} |${f(100 * r.perThreadOfMatmul, 1, 21)}% | ${r.weights}`,
        )
        .join('\n') +
      `\n\nweights identical across threads: SFT ${result.identicalWeights.sft ? 'yes' : 'NO'}, ` +
      `RL update ${result.identicalWeights.rl ? 'yes' : 'NO'}\n`,
  );
}
sftModel?.dispose();
