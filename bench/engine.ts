/**
 * Engine benchmark (not a test): what the rollout engine (episode machine, records, worker threads)
 * costs on top of the work itself, how two workers scale, and how fast a worker starts.
 *
 *   npm run build && npx tsx bench/engine.ts [--json] [--runs 3]
 *
 * The plain loop calls the same policy, parser, tool runner and ToolEnv with no machine and no
 * records; the engine rows play the same episodes through rollout() with every record sealed and
 * written to a file. Overhead = (engine − plain loop) / env steps. Run without the `source` condition,
 * the package resolves to its build (dist/), so the engine and its workers run compiled JavaScript,
 * as an installed package does; each worker row is timed on a warm pool.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import calculator from '../scenarios/calculator/index.ts';
import { createMultihopQaScenario } from '../scenarios/multihop-qa/index.ts';
import {
  createRng,
  episodeConfig,
  parseAction,
  planEpisodes,
  RecordWriter,
  rollout,
  type RolloutExecutor,
  toOpenAITool,
  ToolRunner,
  workerThreads,
  worldSeed,
  type Message,
  type Scenario,
  type TurnRecord,
} from 'agent-r1-ts';

const flags = new Command()
  .option('--json', 'print the figures as one JSON object')
  .option('--runs <n>', 'repetitions of each measurement (median and range reported)', Number, 3)
  .parse()
  .opts<{ json?: boolean; runs: number }>();

const root = fileURLToPath(new URL('..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'bench-engine-'));

interface Case {
  name: string;
  source: string;
  scenario: Scenario;
  /** Episodes for the per-step overhead (sequential) and for the scaling rows. */
  overheadEpisodes: number;
  scalingEpisodes: number;
}

const cases: Case[] = [
  {
    name: 'multihop-qa (large world), expert',
    source: 'multihop-qa',
    scenario: createMultihopQaScenario({ size: 'large' }),
    overheadEpisodes: 300,
    scalingEpisodes: 1200,
  },
  {
    name: 'calculator, expert',
    source: 'calculator',
    scenario: calculator as Scenario,
    overheadEpisodes: 2000,
    scalingEpisodes: 8000,
  },
];

/** The same episodes without the engine, sequentially: policy, parser, tool runner and ToolEnv. */
async function plainLoop(scenario: Scenario, episodes: number): Promise<{ ms: number; steps: number }> {
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { plan } = await planEpisodes({ scenario, policy, split: 'train', episodes, seed: 1 });
  const config = episodeConfig(scenario);
  const runner = new ToolRunner(scenario.tools, {
    timeoutMs: config.toolTimeoutMs,
    maxOutputChars: config.maxToolOutputChars,
  });
  const tools = scenario.tools.map(toOpenAITool);
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

/** One rollout with every record written to a file, as the CLI does. */
async function engine(
  c: Case,
  episodes: number,
  executor?: RolloutExecutor,
  concurrency?: number,
  seed = 1,
): Promise<{ ms: number; steps: number }> {
  const policy = await c.scenario.policies.expert!({ scenario: c.scenario, seed: 0 });
  const writer = new RecordWriter(join(scratch, 'episodes.jsonl'));
  const start = performance.now();
  const r = await rollout({
    scenario: c.scenario,
    policy,
    split: 'train',
    episodes,
    seed,
    executor,
    concurrency,
    onRecord: (record) => writer.write(record),
  });
  writer.close();
  return { ms: performance.now() - start, steps: r.records.reduce((n, x) => n + x.turns.length, 0) };
}

/**
 * The same episodes twice on a fresh pool; the second is timed (threads started, worlds built, and
 * the same tool caches as the plain loop's and the in-process engine's: warm).
 */
async function onWorkers(c: Case, workers: number, episodes: number, concurrency?: number) {
  const executor = workerThreads({ workers, scenarioSource: c.source });
  try {
    await engine(c, episodes, executor, concurrency);
    return await engine(c, episodes, executor, concurrency);
  } finally {
    await executor.close();
  }
}

/** A fresh one-thread pool's first episode, minus the same episode played in this thread. */
async function workerStartup(c: Case): Promise<number> {
  const inProcess = await engine(c, 1);
  const executor = workerThreads({ workers: 1, scenarioSource: c.source });
  try {
    const first = await engine(c, 1, executor);
    return first.ms - inProcess.ms;
  } finally {
    await executor.close();
  }
}

/** `agent-r1 rollout --episodes 1` on the calculator, end to end: process start to exit (compiled CLI). */
function cliOneEpisode(): number {
  const start = performance.now();
  const out = spawnSync(
    process.execPath,
    [
      join(root, 'bin/agent-r1.js'),
      'rollout',
      '--scenario',
      'calculator',
      '--policy',
      'expert',
      '--episodes',
      '1',
      '--out',
      join(mkdtempSync(join(scratch, 'cli-')), 'run'),
    ],
    { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } },
  );
  if (out.status !== 0) throw new Error(`agent-r1 rollout failed: ${out.stderr}`);
  return performance.now() - start;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const spread = (xs: number[]) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
type Spread = ReturnType<typeof spread>;

async function repeat(run: () => Promise<number> | number): Promise<Spread> {
  const xs: number[] = [];
  for (let i = 0; i < flags.runs; i++) xs.push(await run());
  return spread(xs);
}

const loadBefore = loadavg();
const results = [];
for (const c of cases) {
  await plainLoop(c.scenario, 100); // warm the search cache, so both loops do the same (cached) tool work
  await engine(c, 100);
  const usPerStep = (r: { ms: number; steps: number }) => (r.ms * 1000) / r.steps;
  const plain = await repeat(async () => usPerStep(await plainLoop(c.scenario, c.overheadEpisodes)));
  const inProcess = await repeat(async () => usPerStep(await engine(c, c.overheadEpisodes, undefined, 1)));
  const oneWorker = await repeat(async () => usPerStep(await onWorkers(c, 1, c.overheadEpisodes, 1)));
  // Scaling: every timed run plays new episodes (a new seed), so no tool cache holds their results
  // and each thread does the whole work of its share.
  let runSeed = 100;
  const stepsPerSecond = async (workers: number) => {
    const executor = workerThreads({ workers, scenarioSource: c.source });
    try {
      await engine(c, 200, executor, undefined, runSeed++); // threads started, worlds built
      const r = await engine(c, c.scalingEpisodes, executor, undefined, runSeed++);
      return (r.steps / r.ms) * 1000;
    } finally {
      await executor.close();
    }
  };
  const one = await repeat(() => stepsPerSecond(1));
  const two = await repeat(() => stepsPerSecond(2));
  results.push({
    scenario: c.name,
    plainUsPerStep: plain,
    inProcessUsPerStep: inProcess,
    oneWorkerUsPerStep: oneWorker,
    overheadUsPerStep: {
      inProcess: inProcess.median - plain.median,
      oneWorker: oneWorker.median - plain.median,
    },
    stepsPerSecond: { one, two },
    speedup: two.median / one.median,
    speedupRange: { min: two.min / one.max, max: two.max / one.min },
  });
}
const workerStartupMs = await repeat(() => workerStartup(cases[1]!));
const cliMs = await repeat(() => cliOneEpisode());
rmSync(scratch, { recursive: true, force: true });

const figures = {
  machine: `${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}`,
  load: { before: loadBefore.map((x) => Number(x.toFixed(2))), after: loadavg().map((x) => Number(x.toFixed(2))) },
  runs: flags.runs,
  scenarios: results,
  workerStartupMs,
  cliRolloutOneEpisodeMs: cliMs,
};

if (flags.json) {
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} else {
  const f = (n: number, d = 0) => n.toFixed(d);
  const s = (x: Spread, d = 0) => `${f(x.median, d)} (${f(x.min, d)}–${f(x.max, d)})`;
  const lines = [
    `machine: ${figures.machine}; load average before ${figures.load.before.join(' ')}, after ${figures.load.after.join(' ')}`,
    `median of ${flags.runs} runs (min–max)`,
    '',
    '| scenario | plain loop µs/step | engine in-process µs/step | engine, 1 warm worker µs/step | overhead µs/step (in-process / 1 worker) | 1 worker steps/s | 2 workers steps/s | speedup |',
    '|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.scenario} | ${s(r.plainUsPerStep)} | ${s(r.inProcessUsPerStep)} | ${s(r.oneWorkerUsPerStep)} | ` +
        `${f(r.overheadUsPerStep.inProcess)} / ${f(r.overheadUsPerStep.oneWorker)} | ${s(r.stepsPerSecond.one)} | ` +
        `${s(r.stepsPerSecond.two)} | ×${f(r.speedup, 2)} (${f(r.speedupRange.min, 2)}–${f(r.speedupRange.max, 2)}) |`,
    ),
    '',
    `worker start-up (first episode on a fresh thread, less the episode): ${s(workerStartupMs)} ms`,
    `agent-r1 rollout --scenario calculator --episodes 1, end to end: ${s(cliMs)} ms`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
