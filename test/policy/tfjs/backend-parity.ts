/**
 * One backend's half of the webgpu-versus-wasm check (webgpu.slow.test.ts), run as a child process
 * because a process initializes one backend: `node --import=tsx --conditions=source
 * test/policy/tfjs/backend-parity.ts JOB.json BACKEND OUT.json`. From the job's trained checkpoint
 * it plays greedy dev episodes, scores the job's GRPO sequences, saves the checkpoint again, takes
 * one GRPO step, and trains a fresh model for a few SFT steps; it writes what each gave.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../../scenarios/index.ts';
import type { EpisodeRecord } from '../../../src/core/types.ts';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { loadCheckpoint, saveCheckpoint } from '../../../src/policy/tfjs/checkpoint.ts';
import { AdamW } from '../../../src/policy/tfjs/adamw.ts';
import type { ModelConfig } from '../../../src/architectures/gpt/model-config.ts';
import * as tf from '@tensorflow/tfjs';
import { GPTModel, WASM_ATTENTION_LIMIT_BYTES } from '../../../src/architectures/gpt/model.ts';
import { webgpuAdapter } from '../../../src/policy/tfjs/webgpu.ts';
import { trainSft } from '../../../src/policy/tfjs/sft.ts';
import { TfjsPolicy } from '../../../src/policy/tfjs/tfjs-policy.ts';
import type { TrainingSequence } from '../../../src/policy/trajectory.ts';
import { resolveConfig } from '../../../src/rl/config.ts';
import { GptTrainable, scoreGpt } from '../../../src/rl/tfjs-trainable.ts';
import { updateOnBatch } from '../../../src/rl/update/update.ts';
import { rollout } from '../../../src/rollout/rollout.ts';
import { loadScenario } from '../../../src/scenario/load.ts';

export interface ParityJob {
  checkpoint: string;
  /** Expert records: the SFT data. */
  records: EpisodeRecord[];
  /** Sampled episodes of the checkpoint, with their rewards: the GRPO batch. */
  sequences: TrainingSequence[];
  sftSteps: number;
  devEpisodes: number;
}

export interface ParityResult {
  backend: string;
  reason: string;
  greedy: { texts: string[][]; tokens: number[][]; logprobs: number[][]; rewards: number[] };
  scores: number[][];
  /** The reloaded checkpoint saved again on this backend: the job checkpoint's hash if nothing was lost. */
  resavedHash: string;
  checkpointHash: string;
  /** The error a too-large batch got. */
  refused: string;
  /** Max abs error of a 40-input AddN (exact in float32: the terms are multiples of 1/64). */
  addNError: number;
  grpo: { metrics: { [key: string]: unknown }; weights: number[]; before: number[] };
  sft: { losses: number[]; gradNorms: number[]; weights: number[]; start: number[] };
  seconds: { [part: string]: number };
}

async function flatWeights(model: GPTModel): Promise<number[]> {
  const parts = await Promise.all(model.trainableVariables.map((v) => v.data()));
  return parts.flatMap((p) => Array.from(p as Float32Array));
}

async function main(): Promise<void> {
  const [jobPath, backend, outPath] = process.argv.slice(2);
  if (!jobPath || !backend || !outPath) throw new Error('usage: backend-parity.ts JOB.json BACKEND OUT.json');
  const job = JSON.parse(await readFile(jobPath, 'utf8')) as ParityJob;
  const seconds: { [part: string]: number } = {};
  let t0 = performance.now();
  const lap = (part: string) => {
    seconds[part] = (performance.now() - t0) / 1000;
    t0 = performance.now();
  };
  const info = await initBackend(backend);
  lap('init');
  const scenario = await loadScenario('calculator', builtinScenarios);
  const ckpt = await loadCheckpoint(job.checkpoint);
  const { model, tokenizer } = ckpt;

  const greedyPolicy = new TfjsPolicy({
    id: 'parity',
    version: ckpt.hash,
    model,
    tokenizer,
    sampling: { temperature: 0 },
  });
  const { records } = await rollout({
    scenario,
    policy: greedyPolicy,
    split: 'dev',
    episodes: job.devEpisodes,
    seed: 5,
  });
  const greedy = {
    texts: records.map((r) => r.turns.map((t) => t.text)),
    tokens: records.map((r) => r.turns.flatMap((t) => t.tokens ?? [])),
    logprobs: records.map((r) => r.turns.flatMap((t) => t.logprobs ?? [])),
    rewards: records.map((r) => r.outcome.reward),
  };
  lap('greedy');

  const length = Math.max(...job.sequences.map((s) => s.tokens.length));
  const out = scoreGpt(model, tokenizer.pad, {
    tokens: job.sequences.map((s) => s.tokens),
    length,
    mask: job.sequences.map((s) => s.mask),
  });
  const scores = (await out.logprobs.array()).map((row, i) => row.slice(0, job.sequences[i]!.tokens.length));
  out.logprobs.dispose();
  lap('score');

  const dir = await mkdtemp(join(tmpdir(), 'parity-ckpt-'));
  let resavedHash: string;
  try {
    resavedHash = await saveCheckpoint(dir, model, tokenizer, ckpt.meta);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  lap('checkpoint');

  // AddN of more inputs than a kernel may bind (webgpu: chunked in webgpu.ts): 40 terms, 2000 each.
  const terms = Array.from({ length: 40 }, (_, i) =>
    Float32Array.from({ length: 2000 }, (_, j) => ((i + 1) * (j % 7)) / 64),
  );
  const summed = tf.addN(terms.map((x) => tf.tensor1d(x)));
  const got = (await summed.data()) as Float32Array;
  tf.dispose(summed);
  let addNError = 0;
  for (let j = 0; j < 2000; j++)
    addNError = Math.max(addNError, Math.abs(got[j]! - terms.reduce((a, x) => a + x[j]!, 0)));

  // A batch whose attention tensor would not fit the backend's limit is refused before any work.
  const { nHeads: H, contextLength: T } = model.config;
  const limit =
    info.name === 'webgpu' ? webgpuAdapter()!.adapter.limits.maxStorageBufferBindingSize! : WASM_ATTENTION_LIMIT_BYTES;
  const big = tf.zeros([Math.floor(limit / (H * T * T * 4)) + 1, T], 'int32') as tf.Tensor2D;
  let refused = '';
  try {
    model.forward(big);
  } catch (error) {
    refused = error instanceof Error ? error.message : String(error);
  } finally {
    big.dispose();
  }

  const trainable = await GptTrainable.create(model, tokenizer);
  const before = await flatWeights(model);
  const ref = await trainable.freeze();
  const config = resolveConfig({
    algo: 'grpo',
    seed: 1,
    minibatch: job.sequences.length,
    microbatch: 4,
    epochs: 1,
    lr: 1e-3,
    klMode: 'loss',
    klCoef: 0.05,
  });
  const opt = new AdamW(trainable.variables, { lr: config.lr, weightDecay: config.weightDecay });
  const metrics = await updateOnBatch(trainable, ref, opt, config, job.sequences, 7);
  const grpo = { metrics: metrics as unknown as { [key: string]: unknown }, weights: await flatWeights(model), before };
  opt.dispose();
  ref.dispose();
  lap('grpo');

  const losses: number[] = [];
  const gradNorms: number[] = [];
  const sft = await trainSft({
    records: job.records,
    tokenizer,
    model: model.config as Partial<ModelConfig>,
    seed: 2,
    steps: job.sftSteps,
    batchSize: 4,
    lr: 1e-2,
    onStep: (s) => {
      losses.push(s.loss);
      gradNorms.push(s.gradNorm);
    },
  });
  const sftWeights = await flatWeights(sft.model);
  // trainSft's starting point: its seed's initial weights (drawn in JS, the same on every backend).
  const init = new GPTModel({ ...model.config, vocabSize: tokenizer.vocabSize }, 2);
  const start = await flatWeights(init);
  init.dispose();
  sft.model.dispose();
  lap('sft');

  const result: ParityResult = {
    backend: info.name,
    reason: info.reason,
    greedy,
    scores,
    resavedHash,
    checkpointHash: ckpt.hash,
    refused,
    addNError,
    grpo,
    sft: { losses, gradNorms, weights: sftWeights, start },
    seconds,
  };
  await writeFile(outPath, JSON.stringify(result));
}

await main();
