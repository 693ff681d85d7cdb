import { existsSync } from 'node:fs';
import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRng, deriveSeed } from '../core/rng.ts';
import type { EpisodeConfig, EpisodeRecord, Task } from '../core/types.ts';
import { AdamW } from '../policy/tfjs/adamw.ts';
import { buildTrajectories } from '../policy/trajectory.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { TrainConfig } from './config.ts';
import { TrainingError } from './errors.ts';
import { rolloutInThread, type ModelRollout } from './model-rollout.ts';
import {
  appendJsonl,
  checkpointName,
  prepareRunDir,
  readLatest,
  replaceDir,
  truncateJsonl,
  writeCheckpoint,
  writeFileAtomic,
} from './run-dir.ts';
import type { TrainablePolicy } from './trainable.ts';
import type { UpdateMetrics } from './update/metrics.ts';
import type { Scorer } from './update/score.ts';
import { updateOnBatch } from './update/update.ts';

export interface StepMetrics extends UpdateMetrics {
  kind: 'step';
  /** Updates done after this step (1-based). */
  step: number;
  /** The policy version that produced this step's episodes. */
  policyVersion: string;
  episodes: number;
  failed: number;
  /** Episodes left out of training (failed, untokenized), with their reasons counted. */
  skipped: number;
  reward: number;
  success: number;
  meanTurns: number;
  /** Mean of each outcome metric the scenario reports (em, f1, …). */
  outcome: { [key: string]: number };
  rolloutTokens: number;
  /** Wall-clock figures: they vary between runs and are kept apart from everything else. */
  time: { rolloutS: number; updateS: number; tokensPerS: number };
}

export interface EvalMetrics {
  kind: 'eval';
  step: number;
  split: string;
  policyVersion: string;
  episodes: number;
  reward: number;
  success: number;
  outcome: { [key: string]: number };
  summary: { [key: string]: unknown };
  time: { evalS: number };
}

export interface TrainOptions {
  scenario: Scenario;
  /**
   * The initial policy (also the frozen KL reference). On resume, pass the same initial policy:
   * the trainer loads the checkpoint's weights into it after freezing the reference.
   */
  model: TrainablePolicy;
  config: TrainConfig;
  outDir: string;
  resume?: boolean;
  /** What the model was initialised from (recorded in config.json). */
  init?: string;
  episode?: Partial<EpisodeConfig>;
  /** Greedy (0) or sampled evals. */
  evalTemperature?: number;
  /** How episodes are played (default: in this thread; see ReplicaRollouts for two threads). */
  rollouts?: ModelRollout;
  onStep?(metrics: StepMetrics): void;
  onEval?(metrics: EvalMetrics): void;
  onCheckpoint?(dir: string, step: number): void;
  /** Stops after the current step (with a checkpoint). */
  signal?: AbortSignal;
  /** Stop after this step even if config.steps is larger (tests: interrupt a run at a known point). */
  stopAfter?: number;
}

/** The policy of the best dev eval so far (DIR/best, described by DIR/best/best.json). */
export interface BestCheckpoint {
  step: number;
  /** The dev split's EM where the scenario reports it, else its success rate. */
  devScore: number;
  dir: string;
}

export interface TrainResult {
  steps: StepMetrics[];
  evals: EvalMetrics[];
  finalDir: string;
  lastStep: number;
  /** Null when no eval after step 0 ran (evalEvery 0, or fewer steps than evalEvery). */
  best: BestCheckpoint | null;
}

/** What "best" means for a dev eval: EM where the scenario reports it, else success. */
export const devScore = (e: Pick<EvalMetrics, 'outcome' | 'success'>): number => e.outcome.em ?? e.success;

const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/** Mean of every numeric outcome metric over the records (em, f1, …). */
function outcomeMeans(records: readonly EpisodeRecord[]): { [key: string]: number } {
  const sums: { [key: string]: number[] } = {};
  for (const r of records) {
    for (const [k, v] of Object.entries(r.outcome.metrics ?? {})) if (Number.isFinite(v)) (sums[k] ??= []).push(v);
  }
  return Object.fromEntries(Object.entries(sums).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, mean(v)]));
}

/**
 * The training tasks of step s: a walk through seeded permutations of the task pool, so every task
 * is seen once per pass and a resumed run draws exactly the batches an uninterrupted one would.
 */
export function batchTasks(pool: readonly Task[], config: TrainConfig, step: number): Task[] {
  const out: Task[] = [];
  const perms = new Map<number, Task[]>();
  for (let k = 0; k < config.tasksPerStep; k++) {
    const pos = step * config.tasksPerStep + k;
    const pass = Math.floor(pos / pool.length);
    let perm = perms.get(pass);
    if (!perm) {
      perm = createRng(deriveSeed(config.seed, 'task-pass', pass)).shuffle(pool);
      perms.set(pass, perm);
    }
    out.push(perm[pos % pool.length]!);
  }
  return out;
}

/** Whether eval `e` becomes the best: a trained step (> 0) at least as good as the best so far (ties to the later step). */
const improves = (e: EvalMetrics, bestScore: number | null) => e.step > 0 && (bestScore === null || devScore(e) >= bestScore);

/** The best trained eval among `evals`, as the trainer keeps it. */
function bestOf(evals: readonly EvalMetrics[]): EvalMetrics | null {
  let best: EvalMetrics | null = null;
  for (const e of evals) if (improves(e, best && devScore(best))) best = e;
  return best;
}

// The selection's record sits inside best/, so one rename swaps the weights and the record together.
const BEST_RECORD = 'best.json';
const bestRecord = (e: EvalMetrics) => JSON.stringify({ step: e.step, devScore: devScore(e), split: e.split }) + '\n';
const bestCheckpoint = (e: EvalMetrics, outDir: string): BestCheckpoint => ({ step: e.step, devScore: devScore(e), dir: join(outDir, 'best') });

async function saveBest(model: TrainablePolicy, outDir: string, e: EvalMetrics): Promise<BestCheckpoint> {
  const best = bestCheckpoint(e, outDir);
  await replaceDir(best.dir, async (tmp) => {
    await model.save(tmp);
    await writeFile(join(tmp, BEST_RECORD), bestRecord(e));
  });
  return best;
}

/**
 * On resume, the best of the evals kept up to the checkpoint. best/ may hold a later step (written
 * before a crash, rewritten when that step is redone) or nothing (a run from before best/ existed):
 * then that step's checkpoint is copied in while it is still kept; otherwise no best is claimed
 * until an eval at least as good as the lost one.
 */
async function restoreBest(outDir: string, evals: readonly EvalMetrics[]): Promise<{ best: BestCheckpoint | null; score: number | null }> {
  const top = bestOf(evals);
  const dir = join(outDir, 'best');
  if (top === null) {
    await rm(dir, { recursive: true, force: true });
    return { best: null, score: null };
  }
  const onDisk = await readFile(join(dir, BEST_RECORD), 'utf8').catch(() => null);
  if (onDisk !== bestRecord(top)) {
    const kept = join(outDir, 'checkpoints', checkpointName(top.step), 'policy');
    if (!existsSync(kept)) {
      await rm(dir, { recursive: true, force: true });
      return { best: null, score: devScore(top) };
    }
    await replaceDir(dir, async (tmp) => {
      await cp(kept, tmp, { recursive: true });
      await writeFile(join(tmp, BEST_RECORD), bestRecord(top));
    });
  }
  return { best: bestCheckpoint(top, outDir), score: devScore(top) };
}

async function evaluate(opts: TrainOptions, step: number): Promise<EvalMetrics> {
  const { scenario, model, config } = opts;
  const t0 = performance.now();
  const sampling = { temperature: opts.evalTemperature ?? 0 };
  const policy = model.policy(sampling);
  const run = opts.rollouts ?? rolloutInThread;
  const { records, summary } = await run(
    { scenario, split: config.evalSplit, episodes: config.evalEpisodes, seed: deriveSeed(config.seed, 'eval'), concurrency: config.concurrency, config: opts.episode },
    model,
    sampling,
  );
  return {
    kind: 'eval',
    step,
    split: config.evalSplit,
    policyVersion: policy.version,
    episodes: records.length,
    reward: summary.meanReward,
    success: summary.successRate,
    outcome: outcomeMeans(records),
    summary,
    time: { evalS: (performance.now() - t0) / 1000 },
  };
}

/**
 * The RL loop: { rollouts of `group` samples per task → advantages → update epochs } × steps, with
 * an eval on the dev split every `evalEvery` steps, metrics and records appended per step, and
 * atomic checkpoints every `checkpointEvery` steps. Everything random is derived from
 * (seed, step), and the model and optimizer state are restored exactly, so `resume` reproduces
 * an uninterrupted run.
 */
export async function train(opts: TrainOptions): Promise<TrainResult> {
  const { scenario, model, config, outDir } = opts;
  const runConfig = {
    config,
    scenario: { id: scenario.id, version: scenario.version, options: scenario.options },
    init: opts.init ?? null,
    // The initial policy's version: a resume handed another starting model is refused.
    initVersion: model.version(),
    episode: opts.episode ?? {},
    evalTemperature: opts.evalTemperature ?? 0,
  };
  await prepareRunDir(outDir, runConfig, opts.resume ?? false);
  const optimizer = new AdamW(model.variables, { lr: config.lr, weightDecay: config.weightDecay });
  const ref: (Scorer & { dispose(): void }) | null = config.klMode !== 'none' && config.klCoef > 0 ? await model.freeze() : null;
  const metricsPath = join(outDir, 'metrics.jsonl');
  const episodesPath = join(outDir, 'episodes.jsonl');
  const episodesPerStep = config.tasksPerStep * config.group;
  let start = 0;
  const latest = opts.resume ? await readLatest(outDir) : null;
  if (latest) {
    const dir = join(outDir, latest.dir);
    await model.load(join(dir, 'policy'));
    model.weightsChanged();
    await optimizer.load(dir);
    start = latest.step;
  }
  let keptEvals: EvalMetrics[] = [];
  if (opts.resume) {
    // Whatever came after the checkpoint is redone, exactly as it was.
    const kept = await truncateJsonl(metricsPath, (row) => row.step <= start);
    keptEvals = kept.map((l) => JSON.parse(l)).filter((r) => r.kind === 'eval');
    await truncateJsonl(episodesPath, (row) => row.index < start * episodesPerStep);
  }
  const pool = await scenario.tasks({ split: config.trainSplit, seed: config.seed, count: config.taskPool });
  if (pool.length === 0) throw new TrainingError(`scenario ${scenario.id} has no tasks in split "${config.trainSplit}"`);

  const steps: StepMetrics[] = [];
  const evals: EvalMetrics[] = [];
  // Step 0 is the initial policy, not a trained one, so it is never "best".
  let { best, score: bestScore } = opts.resume ? await restoreBest(outDir, keptEvals) : { best: null as BestCheckpoint | null, score: null as number | null };
  const doEval = async (step: number) => {
    const e = await evaluate(opts, step);
    evals.push(e);
    await appendJsonl(metricsPath, [e]);
    // ties go to the later step: leaving the final policy needs a strictly better dev score
    if (improves(e, bestScore)) {
      best = await saveBest(model, outDir, e);
      bestScore = best.devScore;
    }
    opts.onEval?.(e);
  };
  if (start === 0 && config.evalEvery > 0) await doEval(0);

  const last = Math.min(config.steps, opts.stopAfter ?? config.steps);
  let step = start;
  try {
    for (let s = start; s < last; s++) {
      const t0 = performance.now();
      const sampling = { temperature: config.temperature };
      const policy = model.policy(sampling);
      const { records } = await (opts.rollouts ?? rolloutInThread)(
        {
          scenario,
          split: config.trainSplit,
          episodes: episodesPerStep,
          group: config.group,
          seed: deriveSeed(config.seed, 'rollout', s),
          tasks: batchTasks(pool, config, s),
          indexOffset: s * episodesPerStep,
          concurrency: config.concurrency,
          config: opts.episode,
        },
        model,
        sampling,
      );
      const t1 = performance.now();
      const { sequences, skipped } = buildTrajectories(records);
      const update = updateOnBatch(model, ref, optimizer, config, sequences, deriveSeed(config.seed, 'minibatch', s));
      const t2 = performance.now();
      const rolloutTokens = sequences.reduce((a, q) => a + q.mask.reduce((x, y) => x + y, 0), 0);
      const metrics: StepMetrics = {
        kind: 'step',
        step: s + 1,
        policyVersion: policy.version,
        episodes: records.length,
        failed: records.filter((r) => r.status === 'error').length,
        skipped: skipped.length,
        reward: mean(records.map((r) => r.totalReward)),
        success: mean(records.map((r) => (r.outcome.success ? 1 : 0))),
        meanTurns: mean(records.map((r) => r.turns.length)),
        outcome: outcomeMeans(records),
        rolloutTokens,
        ...update,
        time: { rolloutS: (t1 - t0) / 1000, updateS: (t2 - t1) / 1000, tokensPerS: rolloutTokens / ((t2 - t0) / 1000) },
      };
      await appendJsonl(episodesPath, records);
      await appendJsonl(metricsPath, [metrics]);
      steps.push(metrics);
      opts.onStep?.(metrics);
      step = s + 1;
      if (config.evalEvery > 0 && step % config.evalEvery === 0) await doEval(step);
      if (step % config.checkpointEvery === 0 || step === last || opts.signal?.aborted) await checkpoint(step);
      if (opts.signal?.aborted) break;
    }
  } finally {
    ref?.dispose();
    optimizer.dispose();
  }
  if (step === config.steps && config.evalEvery > 0 && step % config.evalEvery !== 0) await doEval(step);
  const finalDir = join(outDir, 'final');
  await replaceDir(finalDir, (tmp) => model.save(tmp));
  return { steps, evals, finalDir, lastStep: step, best };

  async function checkpoint(at: number) {
    const dir = await writeCheckpoint(outDir, at, async (tmp) => {
      await model.save(join(tmp, 'policy'));
      await optimizer.save(tmp);
      await writeFileAtomic(join(tmp, 'trainer.json'), JSON.stringify({ step: at, version: model.version() }));
    });
    opts.onCheckpoint?.(dir, at);
  }
}
