/**
 * Engine benchmark (not a test): what the rollout engine (episode machine, records, worker threads)
 * costs on top of the work itself, how two workers scale, and how fast a worker starts.
 *
 *   npm run build && npx tsx bench/engine.ts [--json] [--runs 3]
 *
 * The plain loop calls the same policy, parser, tool runner and ToolEnv with no machine and no
 * records; the engine rows play the same episodes through rollout() with every record sealed and
 * written to a file. Overhead = (engine − plain loop) / env steps, taken within each round of
 * interleaved runs (see overheadRounds). Run without the `source` condition, the package resolves to
 * its build (dist/), so the engine and its workers run compiled JavaScript, as an installed package does.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command } from 'commander';
import { Worker } from 'node:worker_threads';
import { build } from 'esbuild';
import { RecordWriter, rollout, type RolloutExecutor, workerThreads, type Scenario } from 'agent-r1-ts';
import { externalPackages } from '../bin/bundle-workers.js';
import { benchScenario, plainLoop, REPO_ROOT } from './plain-loop.ts';
import type { PlainThreadMessage } from './plain-loop-thread.ts';

const flags = new Command()
  .option('--json', 'print the figures as one JSON object')
  .option('--runs <n>', 'repetitions of each measurement (median and range reported)', Number, 3)
  .option('--scenario <name>', 'only this scenario (multihop-qa or calculator)')
  .parse()
  .opts<{ json?: boolean; runs: number; scenario?: string }>();

const scratch = mkdtempSync(join(tmpdir(), 'bench-engine-'));

interface Case {
  name: string;
  source: string;
  scenario: Scenario;
  /** Episodes for the per-step overhead (sequential) and for the scaling rows. */
  overheadEpisodes: number;
  scalingEpisodes: number;
}

const allCases: Array<Omit<Case, 'scenario'>> = [
  { name: 'multihop-qa (large world), expert', source: 'multihop-qa', overheadEpisodes: 600, scalingEpisodes: 1200 },
  { name: 'calculator, expert', source: 'calculator', overheadEpisodes: 4000, scalingEpisodes: 32000 },
];
if (flags.scenario !== undefined && !allCases.some((c) => c.source === flags.scenario)) {
  throw new Error(`bench/engine.ts: --scenario ${flags.scenario}: one of ${allCases.map((c) => c.source).join(', ')}`);
}
// Scenarios are built only for the cases run: the large multihop world alone is a heap of its own.
const cases: Case[] = [];
for (const c of allCases.filter((c) => flags.scenario === undefined || c.source === flags.scenario))
  cases.push({ ...c, scenario: await benchScenario(c.source) });
const calculatorCase = cases.find((c) => c.source === 'calculator') ?? {
  ...allCases[1]!,
  scenario: await benchScenario('calculator'),
};

/**
 * One rollout with every record written to a file and let go, as the CLI does (each line as it
 * came: from a worker, its bytes, never parsed here). `mainMs`: the time this thread's event loop
 * was busy meanwhile (performance.eventLoopUtilization), the coordinator's own work beside the workers.
 */
async function engine(
  c: Case,
  episodes: number,
  executor?: RolloutExecutor,
  concurrency?: number,
  seed = 1,
): Promise<{ ms: number; steps: number; mainMs: number }> {
  const policy = await c.scenario.policies.expert!({ scenario: c.scenario, seed: 0 });
  const writer = new RecordWriter(join(scratch, 'episodes.jsonl'));
  let steps = 0;
  const busy = performance.eventLoopUtilization();
  const start = performance.now();
  await rollout({
    scenario: c.scenario,
    policy,
    split: 'train',
    episodes,
    seed,
    executor,
    concurrency,
    keepRecords: false,
    onEpisode: (episode) => {
      writer.writeLine(episode.line);
      steps += episode.digest.turns;
    },
  });
  await writer.end();
  const ms = performance.now() - start;
  return { ms, steps, mainMs: performance.eventLoopUtilization(busy).active };
}

/**
 * The plain loop's thread, bundled to JavaScript as the engine's workers are (dist/workers/bundle),
 * so both run compiled code with no loader. The package itself stays an import of its build, the
 * copy the built scenarios import: one copy of it in the thread, not two.
 */
async function bundlePlainThread(): Promise<string> {
  // Under node_modules, so that the packages it leaves as imports resolve.
  const outfile = join(REPO_ROOT, 'node_modules/.cache/agent-r1-bench/plain-loop-thread.mjs');
  await build({
    entryPoints: [fileURLToPath(new URL('./plain-loop-thread.ts', import.meta.url))],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'node',
    external: externalPackages(),
    plugins: [
      {
        name: 'package-build',
        setup: (bundle) =>
          bundle.onResolve({ filter: /^agent-r1-ts$/ }, () => ({
            path: pathToFileURL(join(REPO_ROOT, 'dist/src/index.js')).href,
            external: true,
          })),
      },
    ],
    logLevel: 'warning',
  });
  return outfile;
}
const PLAIN_THREAD = await bundlePlainThread();

/**
 * The plain loop on `threads` worker threads, each playing the episodes of a run that the engine's
 * worker of its number plays (plainShare), after a warm-up run of other episodes; steps/s over the
 * wall time of the play alone: each thread has made the run's plan before the clock starts (the
 * engine makes it once, in the coordinator, and its rows count it). The seeds are the engine's for
 * the same repeat (see scalingRepeat).
 */
async function plainStepsPerSecond(c: Case, threads: number, seeds: ScalingSeeds): Promise<number> {
  const workers = Array.from({ length: threads }, () => new Worker(PLAIN_THREAD));
  const ask = <T>(w: Worker, message: PlainThreadMessage) =>
    new Promise<T>((resolve, reject) => {
      w.once('message', resolve).once('error', reject);
      w.postMessage(message);
    });
  const play = async (episodes: number, runSeed: number) => {
    await Promise.all(
      workers.map((w, share) =>
        ask(w, { type: 'prepare', source: c.source, root: REPO_ROOT, episodes, seed: runSeed, share, of: threads }),
      ),
    );
    const start = performance.now();
    const steps = await Promise.all(workers.map((w) => ask<number>(w, { type: 'play' })));
    return { ms: performance.now() - start, steps: steps.reduce((a, b) => a + b, 0) };
  };
  try {
    await play(c.scalingEpisodes, seeds.warmUp); // threads started, worlds built, code compiled
    const { ms, steps } = await play(c.scalingEpisodes, seeds.timed);
    return (steps / ms) * 1000;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
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
      join(REPO_ROOT, 'bin/agent-r1.js'),
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

/** The seeds of one scaling repeat: its warm-up run's and its timed run's. */
interface ScalingSeeds {
  warmUp: number;
  timed: number;
}

/**
 * One repeat of the scaling rows: the engine on 1 and 2 fresh workers and the plain loop on 1 and 2
 * fresh threads, back to back, each warmed up on the same episodes and timed on the same new ones.
 * The same seeds matter: every thread's search cache keeps what the warm-up found, and how much of
 * the timed run it holds depends on the two runs' tasks (with other seeds per row, the rows measured
 * other work). Back to back, the machine's drift over minutes falls on all four alike.
 */
async function scalingRepeat(c: Case, seeds: ScalingSeeds) {
  const engineStepsPerSecond = async (workers: number) => {
    const executor = workerThreads({ workers, scenarioSource: c.source });
    try {
      await engine(c, c.scalingEpisodes, executor, undefined, seeds.warmUp); // threads started, worlds built, code compiled
      const r = await engine(c, c.scalingEpisodes, executor, undefined, seeds.timed);
      return (r.steps / r.ms) * 1000;
    } finally {
      await executor.close();
    }
  };
  return {
    one: await engineStepsPerSecond(1),
    two: await engineStepsPerSecond(2),
    plainOne: await plainStepsPerSecond(c, 1, seeds),
    plainTwo: await plainStepsPerSecond(c, 2, seeds),
  };
}

/**
 * The overhead rows. The engine is timed in rounds, each a plain-loop run and an engine run back to
 * back, and its overhead is the difference within a round (this machine's speed drifts over
 * minutes). In-process rounds come first: once worker records (parsed JSON, other object shapes)
 * have gone through this thread's rollout code, the in-process engine runs slower here than in a
 * process that only plays in-process. Every loop first plays the same episodes twice untimed: JIT
 * compiled, and the same tool caches warm in every loop (each thread's search cache holds every
 * query of these episodes). The worker keeps its pool throughout.
 */
async function overheadRounds(c: Case) {
  const usPerStep = (r: { ms: number; steps: number }) => (r.ms * 1000) / r.steps;
  const plainLoopRun = async () => usPerStep(await plainLoop(c.scenario, c.overheadEpisodes));
  const rounds = async (engineRun: () => ReturnType<typeof engine>) => {
    for (const loop of [plainLoopRun, engineRun]) for (let i = 0; i < 2; i++) await loop();
    const plain: number[] = [];
    const engine: number[] = [];
    const main: number[] = [];
    for (let i = 0; i < flags.runs; i++) {
      plain.push(await plainLoopRun());
      const run = await engineRun();
      engine.push(usPerStep(run));
      main.push((run.mainMs * 1000) / run.steps);
    }
    return { plain, engine, main, overhead: spread(engine.map((x, i) => x - plain[i]!)) };
  };
  const inProcess = await rounds(() => engine(c, c.overheadEpisodes, undefined, 1));
  const pool = workerThreads({ workers: 1, scenarioSource: c.source });
  try {
    const oneWorker = await rounds(() => engine(c, c.overheadEpisodes, pool, 1));
    return {
      plain: spread([...inProcess.plain, ...oneWorker.plain]),
      inProcess: spread(inProcess.engine),
      oneWorker: spread(oneWorker.engine),
      overhead: { inProcess: inProcess.overhead, oneWorker: oneWorker.overhead },
      oneWorkerMain: spread(oneWorker.main),
    };
  } finally {
    await pool.close();
  }
}

const loadBefore = loadavg();
const results = [];
for (const c of cases) {
  const rounds = await overheadRounds(c);
  const scaling: Array<Record<'one' | 'two' | 'plainOne' | 'plainTwo', number>> = [];
  for (let i = 0; i < flags.runs; i++) scaling.push(await scalingRepeat(c, { warmUp: 1000 + i, timed: 100 + i }));
  const pick = (key: keyof (typeof scaling)[number]) => spread(scaling.map((r) => r[key]));
  const [one, two, plainOne, plainTwo] = [pick('one'), pick('two'), pick('plainOne'), pick('plainTwo')];
  results.push({
    scenario: c.name,
    plainUsPerStep: rounds.plain,
    inProcessUsPerStep: rounds.inProcess,
    oneWorkerUsPerStep: rounds.oneWorker,
    // Median of the rounds' differences; the spread alongside.
    overheadUsPerStep: { inProcess: rounds.overhead.inProcess.median, oneWorker: rounds.overhead.oneWorker.median },
    overheadSpread: rounds.overhead,
    // The main thread's busy time per step through one worker (median; spread alongside).
    mainThreadUsPerStep: rounds.oneWorkerMain.median,
    mainThreadSpread: rounds.oneWorkerMain,
    stepsPerSecond: { one, two },
    speedup: two.median / one.median,
    speedupRange: { min: two.min / one.max, max: two.max / one.min },
    plainStepsPerSecond: { one: plainOne, two: plainTwo },
    plainSpeedup: plainTwo.median / plainOne.median,
    // Each repeat's engine speedup over the plain loop's in the same repeat (same seeds, minutes apart at most).
    speedupVsPlain: spread(scaling.map((r) => r.two / r.one / (r.plainTwo / r.plainOne))),
  });
}
const workerStartupMs = await repeat(() => workerStartup(calculatorCase));
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
    '| scenario | plain loop µs/step | engine in-process µs/step | engine, 1 warm worker µs/step | overhead µs/step (in-process / 1 worker) | 1 worker steps/s | 2 workers steps/s | speedup | plain loop: 1 thread steps/s | 2 threads steps/s | speedup |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.scenario} | ${s(r.plainUsPerStep)} | ${s(r.inProcessUsPerStep)} | ${s(r.oneWorkerUsPerStep)} | ` +
        `${s(r.overheadSpread.inProcess)} / ${s(r.overheadSpread.oneWorker)} | ${s(r.stepsPerSecond.one)} | ` +
        `${s(r.stepsPerSecond.two)} | ×${f(r.speedup, 2)} (${f(r.speedupRange.min, 2)}–${f(r.speedupRange.max, 2)}) | ` +
        `${s(r.plainStepsPerSecond.one)} | ${s(r.plainStepsPerSecond.two)} | ×${f(r.plainSpeedup, 2)} |`,
    ),
    '',
    ...results.map(
      (r) => `main thread's busy time through 1 worker, ${r.scenario}: ${s(r.mainThreadSpread, 1)} µs/step`,
    ),
    ...results.map(
      (r) => `engine's 2-worker speedup ÷ the plain loop's, repeat by repeat, ${r.scenario}: ${s(r.speedupVsPlain, 2)}`,
    ),
    `worker start-up (first episode on a fresh thread, less the episode): ${s(workerStartupMs)} ms`,
    `agent-r1 rollout --scenario calculator --episodes 1, end to end: ${s(cliMs)} ms`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
