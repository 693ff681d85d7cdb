/**
 * Rollout benchmark (not a test): parallel scaling on a CPU-bound tool, the engine's overhead per
 * env step, and batch-queue batching with a checkpoint policy. Prints a table; --json prints the
 * figures as one JSON object. Run: npx tsx --conditions=source bench/rollout.ts [--json] [--episodes N]
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import calculator from '../scenarios/calculator/index.ts';
import { createMultihopQaScenario } from '../scenarios/multihop-qa/index.ts';
import { createRng } from '../src/core/rng.ts';
import type { Scenario } from '../src/scenario/scenario.ts';
import { parseAction } from '../src/parse/parse-action.ts';
import {
  DEFAULT_MODEL_CONFIG,
  GPTModel,
  initBackend,
  loadCheckpointPolicy,
  saveCheckpoint,
  trainTokenizer,
} from '../src/policy/tfjs/index.ts';
import { planEpisodes } from '../src/rollout/plan.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { workerThreads } from '../src/rollout/worker-threads.ts';
import { episodeConfig } from '../src/episode/run-episode.ts';
import { worldSeed } from '../src/episode/drive-episode.ts';
import { openAITools } from '../src/episode/drive-episode.ts';
import { ToolRunner } from '../src/tools/runner.ts';
import type { Message, TurnRecord } from '../src/core/types.ts';

const flags = new Command()
  .option('--json', 'print the figures as JSON')
  .option('--episodes <n>', 'episodes per scaling run', (v) => Number(v), 600)
  .parse()
  .opts<{ json?: boolean; episodes: number }>();

/** Steady-state episodes/s: from the first finished episode to the last (excludes worker start-up). */
async function scaling(scenario: Scenario, workers: number) {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const stamps: number[] = [];
  const started = performance.now();
  const executor = workerThreads({ workers, scenarioSource: 'multihop-qa' });
  const r = await rollout({
    scenario,
    policy,
    split: 'train',
    episodes: flags.episodes,
    seed: 1,
    executor,
    onProgress: () => stamps.push(performance.now()),
  });
  await executor.close();
  const steady = ((stamps.length - 1) / (stamps.at(-1)! - stamps[0]!)) * 1000;
  const steps = r.records.reduce((n, x) => n + x.turns.length, 0);
  return {
    workers,
    episodesPerSecond: steady,
    wallSeconds: (performance.now() - started) / 1000,
    steps,
    toolShare: r.throughput.share.tools,
  };
}

/** The same episodes without the engine: policy, parser, tool runner and ToolEnv called in a plain loop. */
async function plainLoop(scenario: Scenario, episodes: number) {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { plan } = await planEpisodes({ scenario, policy, split: 'train', episodes, seed: 1 });
  const config = episodeConfig(scenario);
  const runner = new ToolRunner(scenario.tools, {
    timeoutMs: config.toolTimeoutMs,
    maxOutputChars: config.maxToolOutputChars,
  });
  const tools = openAITools(scenario);
  let steps = 0;
  const start = performance.now();
  for (const item of plan) {
    const rng = createRng(worldSeed(item.seed));
    const state = await scenario.env.init?.(item.task, { rng });
    const messages: Message[] = scenario.env.prompt(item.task, tools);
    const history: TurnRecord[] = [];
    let answer: string | null = null;
    for (let turn = 0; turn < config.maxTurns; turn++) {
      const out = await policy.act({
        episodeId: 'x',
        task: item.task,
        tools,
        messages,
        turn,
        seed: 0,
        maxTokens: config.maxTokensPerTurn,
      });
      const action = parseAction(out.text);
      const results =
        action.kind === 'tool_calls'
          ? await Promise.all(action.calls.map((c) => runner.run(c, { task: item.task, rng, state })))
          : [];
      const step = await scenario.env.step({ task: item.task, state, rng, turn, action, results, history });
      steps++;
      messages.push({ role: 'assistant', content: out.text });
      if (step.observation !== null) messages.push({ role: 'tool', content: step.observation });
      history.push({
        index: turn,
        text: out.text,
        tokenCount: 0,
        action,
        results,
        observation: step.observation,
        reward: step.reward,
        done: step.done,
        states: [],
      });
      if (action.kind === 'answer') {
        answer = action.text;
        break;
      }
    }
    await scenario.env.outcome({ task: item.task, state, answer, endReason: 'answered', history });
    await scenario.env.dispose?.(state);
  }
  return { ms: performance.now() - start, steps };
}

async function engineInProcess(scenario: Scenario, episodes: number) {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const start = performance.now();
  const r = await rollout({ scenario, policy, split: 'train', episodes, seed: 1, concurrency: 1 });
  return { ms: performance.now() - start, steps: r.records.reduce((n, x) => n + x.turns.length, 0) };
}

async function engineOneWorker(scenario: Scenario, episodes: number) {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const executor = workerThreads({ workers: 1, scenarioSource: 'multihop-qa' });
  const run = () => rollout({ scenario, policy, split: 'train', episodes, seed: 1, executor, concurrency: 1 });
  await run(); // warm: the worker's world, index and search cache
  const start = performance.now();
  const r = await run();
  const ms = performance.now() - start;
  await executor.close();
  return { ms, steps: r.records.reduce((n, x) => n + x.turns.length, 0) };
}

async function checkpointBatching() {
  await initBackend();
  const calc = calculator as Exclude<typeof calculator, (...args: never[]) => unknown>;
  const texts = calc.tasks({ split: 'train', seed: 0, count: 200 }).map((t) => t.question);
  const tokenizer = trainTokenizer(texts, { vocabSize: 512 });
  const model = new GPTModel({ vocabSize: tokenizer.vocabSize, ...DEFAULT_MODEL_CONFIG }, 1);
  const dir = join(mkdtempSync(join(tmpdir(), 'bench-ckpt-')), 'ckpt');
  await saveCheckpoint(dir, model, tokenizer, {});
  const policy = await loadCheckpointPolicy(dir);
  const rows = [];
  for (const maxBatch of [8, 32]) {
    const executor = workerThreads({ workers: 2, maxBatch });
    const config = { maxTurns: 2, maxTokensPerTurn: 32 };
    const r = await rollout({ scenario: calc, policy, split: 'train', episodes: 64, seed: 1, executor, config });
    await executor.close();
    const s = r.batching!;
    rows.push({
      maxBatch,
      meanBatch: s.meanBatchSize,
      maxObservedBatch: Math.max(...Object.keys(s.batchSizes).map(Number)),
      policyShare: r.throughput.share.policy,
      tokensPerSecond: r.throughput.tokensPerSecond,
    });
  }
  return rows;
}

const scenario = createMultihopQaScenario({ size: 'large' });
const one = await scaling(scenario, 1);
const two = await scaling(scenario, 2);
const overheadEpisodes = 150;
// Warm the search cache first, so the plain loop and the engine do the same (cached) tool work.
await plainLoop(scenario, overheadEpisodes);
const plain = await plainLoop(scenario, overheadEpisodes);
const inProcess = await engineInProcess(scenario, overheadEpisodes);
const worker = await engineOneWorker(scenario, overheadEpisodes);
const batching = await checkpointBatching();

const figures = {
  machine: `${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}`,
  scaling: { one, two, speedup: two.episodesPerSecond / one.episodesPerSecond },
  overhead: {
    plainUsPerStep: (plain.ms * 1000) / plain.steps,
    engineUsPerStep: (inProcess.ms * 1000) / inProcess.steps,
    workerUsPerStep: (worker.ms * 1000) / worker.steps,
    addedUsPerStep: ((inProcess.ms - plain.ms) * 1000) / plain.steps,
    addedUsPerStepOneWorker: ((worker.ms - plain.ms) * 1000) / plain.steps,
  },
  batching,
};

if (flags.json) {
  process.stdout.write(JSON.stringify(figures) + '\n');
} else {
  const f = (n: number, d = 1) => n.toFixed(d);
  const o = figures.overhead;
  process.stdout.write(
    [
      `machine: ${figures.machine}`,
      '',
      '| measurement | value |',
      '|---|---|',
      `| multihop-qa (large world, BM25 search), expert, 1 worker | ${f(one.episodesPerSecond)} episodes/s |`,
      `| same, 2 workers | ${f(two.episodesPerSecond)} episodes/s (×${f(figures.scaling.speedup, 2)}) |`,
      `| plain loop (no XState, no Piscina) | ${f(o.plainUsPerStep, 0)} µs/step |`,
      `| engine, in-process | ${f(o.engineUsPerStep, 0)} µs/step (+${f(o.addedUsPerStep, 0)} µs/step) |`,
      `| engine, 1 worker (warm) | ${f(o.workerUsPerStep, 0)} µs/step (+${f(o.addedUsPerStepOneWorker, 0)} µs/step) |`,
      ...batching.map(
        (b) =>
          `| checkpoint policy (default size, untrained), 2 workers, --max-batch ${b.maxBatch} | mean batch ${f(b.meanBatch)}, max ${b.maxObservedBatch}; policy ${f(b.policyShare * 100, 0)}% of wall; ${f(b.tokensPerSecond, 0)} tokens/s |`,
      ),
    ].join('\n') + '\n',
  );
}
