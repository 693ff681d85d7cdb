import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRng, deriveSeed } from '../core/rng.ts';
import type { EpisodeConfig, EpisodeRecord, Task } from '../core/types.ts';
import { AdamW } from '../policy/tfjs/adamw.ts';
import type { GradientExecutor } from '../policy/tfjs/data-parallel.ts';
import { buildTrajectories } from '../policy/trajectory.ts';
import { roleView } from '../record/role-view.ts';
import { toOpenAITool } from '../tools/tool.ts';
import { makeDir } from '../core/make-dir.ts';
import type { RolloutExecutor } from '../rollout/executor.ts';
import { rollout } from '../rollout/rollout.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { Policy } from '../policy/policy.ts';
import { BestDevCheckpoint, type BestCheckpoint } from './best-checkpoint.ts';
import type { TrainConfig } from './config.ts';
import { TrainingError } from './errors.ts';
import {
  appendJsonl,
  prepareRunDir,
  readLatest,
  replaceDir,
  truncateJsonl,
  writeCheckpoint,
  writeFileAtomic,
} from './run-dir.ts';
import type { TrainablePolicy } from './trainable.ts';
import { emptyMetrics, type UpdateMetrics } from './update/metrics.ts';
import type { Scorer } from './update/score.ts';
import { updateOnBatch } from './update/update.ts';
import { TensorBoardWriter } from './tensorboard.ts';

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
  /** The user's update, when the run trains it (TrainOptions.user): its mean reward and its samples' figures. */
  user?: UpdateMetrics & { reward: number; episodes: number };
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

/**
 * Where a run's episodes come from: a scenario's rollouts (the default), or an agent's runs through
 * the recording gateway (src/gateway/train-agent.ts). Either way they arrive as records.
 */
export interface EpisodeSource {
  /** Who the episodes are of, as config.json names it. */
  readonly identity: { id: string; version: string; options: { [key: string]: string } };
  tasks(request: { split: string; seed: number; count: number }): Promise<Task[]>;
  /** Plays episodes with a policy: `tasks` × `group` for training; `episodes` of `split` for an eval. */
  play(request: {
    policy: Policy;
    split: string;
    episodes: number;
    seed: number;
    tasks?: Task[];
    group?: number;
    indexOffset?: number;
    /** Who plays the scenario's user (default: the source's own choice). */
    userPolicy?: Policy;
  }): Promise<{ records: EpisodeRecord[]; summary: { meanReward: number; successRate: number } & object }>;
}

export interface TrainOptions {
  /** Whose rollouts train the model; or `source`, from which episodes come instead. */
  scenario?: Scenario;
  source?: EpisodeSource;
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
  /** Where episodes are played (default: in this thread; see Replica for two threads). */
  executor?: RolloutExecutor;
  /** Who plays the scenario's user in the rollouts and evals (default: the scenario's own; this thread only). */
  userPolicy?: Policy;
  /**
   * Train the scenario's user too (`train --roles agent,user`): this model plays it in the rollouts
   * and evals and learns from its own view of each episode (roleView), with its own optimizer, its
   * loss on its own tokens only, its advantages among its own samples, and the reward the scenario
   * gives the user (UserRole.reward). Checkpoints keep it in `user/` beside the agent's policy.
   */
  user?: TrainablePolicy;
  /** Whether the agent's weights learn (default true; false, with `user`: the user learns against a fixed agent). */
  trainAgent?: boolean;
  /**
   * Where a GPT policy's update computes its micro-batch gradients (default: this thread; see
   * TrainThreads). It changes the time an update takes, never its result.
   */
  replicas?: GradientExecutor;
  onStep?(metrics: StepMetrics): void;
  onEval?(metrics: EvalMetrics): void;
  onCheckpoint?(dir: string, step: number): void;
  /** Stops after the current step (with a checkpoint). */
  signal?: AbortSignal;
  /** Stop after this step even if config.steps is larger (tests: interrupt a run at a known point). */
  stopAfter?: number;
}

export interface TrainResult {
  steps: StepMetrics[];
  evals: EvalMetrics[];
  finalDir: string;
  lastStep: number;
  /** Null when no eval after step 0 ran (evalEvery 0, or fewer steps than evalEvery). */
  best: BestCheckpoint | null;
}

const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/** Mean of every numeric outcome metric over the records (em, f1, …). */
function outcomeMeans(records: readonly EpisodeRecord[]): { [key: string]: number } {
  const sums: { [key: string]: number[] } = {};
  for (const r of records) {
    for (const [k, v] of Object.entries(r.outcome.metrics ?? {})) if (Number.isFinite(v)) (sums[k] ??= []).push(v);
  }
  return Object.fromEntries(
    Object.entries(sums)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => [k, mean(v)]),
  );
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

/** The scenario's rollouts as an episode source. */
function scenarioSource(opts: TrainOptions): EpisodeSource {
  const { scenario, config } = opts;
  if (!scenario) throw new TrainingError('train() needs a scenario or an episode source');
  return {
    identity: { id: scenario.id, version: scenario.version, options: scenario.options },
    tasks: (request) => Promise.resolve(scenario.tasks(request)),
    play: (request) =>
      rollout({
        scenario,
        ...request,
        concurrency: config.concurrency,
        config: opts.episode,
        executor: opts.executor,
        ...((request.userPolicy ?? opts.userPolicy) ? { userPolicy: request.userPolicy ?? opts.userPolicy } : {}),
      }),
  };
}

async function evaluate(opts: TrainOptions, source: EpisodeSource, step: number): Promise<EvalMetrics> {
  const { model, config } = opts;
  const t0 = performance.now();
  const sampling = { temperature: opts.evalTemperature ?? 0 };
  const policy = model.policy(sampling);
  const { records, summary } = await source.play({
    policy,
    split: config.evalSplit,
    episodes: config.evalEpisodes,
    seed: deriveSeed(config.seed, 'eval'),
    ...(opts.user ? { userPolicy: opts.user.policy(sampling) } : {}),
  });
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

/** A metrics row's fields for TensorBoard: all but the row's kind and step, which the event carries. */
function stepScalars(row: StepMetrics | EvalMetrics): object {
  const { kind: _kind, step: _step, ...rest } = row;
  return rest;
}

/**
 * The RL loop: { rollouts of `group` samples per task → advantages → update epochs } × steps, with
 * an eval on the dev split every `evalEvery` steps, metrics and records appended per step, and
 * atomic checkpoints every `checkpointEvery` steps. Everything random is derived from
 * (seed, step), and the model and optimizer state are restored exactly, so `resume` reproduces
 * an uninterrupted run.
 */
export async function train(opts: TrainOptions): Promise<TrainResult> {
  const { model, config, outDir, user } = opts;
  const trainAgent = opts.trainAgent ?? true;
  if (user && !opts.scenario?.user) throw new TrainingError('training the user needs a scenario with a user');
  if (!trainAgent && !user) throw new TrainingError('nothing to train: the agent is fixed and no user model is given');
  const source = opts.source ?? scenarioSource(opts);
  const runConfig = {
    config,
    scenario: source.identity,
    init: opts.init ?? null,
    // The initial policy's version: a resume handed another starting model is refused.
    initVersion: model.version(),
    episode: opts.episode ?? {},
    evalTemperature: opts.evalTemperature ?? 0,
    ...(user ? { roles: { agent: trainAgent, user: user.version() } } : {}),
  };
  await prepareRunDir(outDir, runConfig, opts.resume ?? false);
  const optimizer = new AdamW(model.variables, { lr: config.lr, weightDecay: config.weightDecay });
  const userOptimizer = user && new AdamW(user.variables, { lr: config.lr, weightDecay: config.weightDecay });
  const withKl = config.klMode !== 'none' && config.klCoef > 0;
  const ref: (Scorer & { dispose(): void }) | null = withKl ? await model.freeze() : null;
  const userRef: (Scorer & { dispose(): void }) | null = user && withKl ? await user.freeze() : null;
  // Wherever the agent's policy is saved, a trained user's goes in its `user/` folder.
  const models = { save: (dir: string) => saveModels(model, user, dir) };
  const metricsPath = join(outDir, 'metrics.jsonl');
  const tb = new TensorBoardWriter(join(outDir, 'tb'));
  const episodesPath = join(outDir, 'episodes.jsonl');
  const episodesPerStep = config.tasksPerStep * config.group;
  let start = 0;
  const latest = opts.resume ? await readLatest(outDir) : null;
  if (latest) {
    const dir = join(outDir, latest.dir);
    await model.load(join(dir, 'policy'));
    await model.weightsChanged();
    await optimizer.load(dir);
    if (user) {
      await user.load(join(dir, 'policy', 'user'));
      await user.weightsChanged();
      await userOptimizer!.load(join(dir, 'user-optimizer'));
    }
    start = latest.step;
  }
  let keptEvals: EvalMetrics[] = [];
  if (opts.resume) {
    // Whatever came after the checkpoint is redone, exactly as it was.
    const kept = await truncateJsonl(metricsPath, (row) => row.step <= start);
    keptEvals = kept.map((l) => JSON.parse(l)).filter((r) => r.kind === 'eval');
    await truncateJsonl(episodesPath, (row) => row.index < start * episodesPerStep);
  }
  const pool = await source.tasks({ split: config.trainSplit, seed: config.seed, count: config.taskPool });
  if (pool.length === 0) throw new TrainingError(`${source.identity.id} has no tasks in split "${config.trainSplit}"`);

  const steps: StepMetrics[] = [];
  const evals: EvalMetrics[] = [];
  const selection = opts.resume ? await BestDevCheckpoint.restore(outDir, keptEvals) : BestDevCheckpoint.fresh(outDir);
  const doEval = async (step: number) => {
    const e = await evaluate(opts, source, step);
    evals.push(e);
    await appendJsonl(metricsPath, [e]);
    tb.scalars(e.step, stepScalars(e), `eval/${e.split}/`);
    // ties go to the later step: leaving the final policy needs a strictly better dev score
    await selection.consider(models, e);
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
      const userPolicy = user?.policy(sampling);
      const { records } = await source.play({
        policy,
        split: config.trainSplit,
        episodes: episodesPerStep,
        group: config.group,
        seed: deriveSeed(config.seed, 'rollout', s),
        tasks: batchTasks(pool, config, s),
        indexOffset: s * episodesPerStep,
        ...(userPolicy ? { userPolicy } : {}),
      });
      const t1 = performance.now();
      const { sequences, skipped } = buildTrajectories(records);
      let advantageValues: number[] = [];
      const shuffleSeed = deriveSeed(config.seed, 'minibatch', s);
      const update = trainAgent
        ? await updateOnBatch(model, ref, optimizer, config, sequences, shuffleSeed, {
            onAdvantages: (values) => (advantageValues = values),
            replicas: opts.replicas,
          })
        : emptyMetrics(0);
      const userUpdate =
        user && userPolicy
          ? await updateUser(
              user,
              userPolicy,
              userRef,
              userOptimizer!,
              config,
              records,
              deriveSeed(config.seed, 'minibatch-user', s),
              opts.scenario!,
            )
          : undefined;
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
        ...(userUpdate ? { user: userUpdate } : {}),
      };
      await appendJsonl(episodesPath, records);
      await appendJsonl(metricsPath, [metrics]);
      tb.scalars(metrics.step, stepScalars(metrics));
      tb.histogram(
        metrics.step,
        'reward',
        records.map((r) => r.totalReward),
      );
      tb.histogram(metrics.step, 'advantage', advantageValues);
      steps.push(metrics);
      opts.onStep?.(metrics);
      step = s + 1;
      if (config.evalEvery > 0 && step % config.evalEvery === 0) await doEval(step);
      if (step % config.checkpointEvery === 0 || step === last || opts.signal?.aborted) await checkpoint(step);
      if (opts.signal?.aborted) break;
    }
  } finally {
    ref?.dispose();
    userRef?.dispose();
    optimizer.dispose();
    userOptimizer?.dispose();
  }
  if (step === config.steps && config.evalEvery > 0 && step % config.evalEvery !== 0) await doEval(step);
  const finalDir = join(outDir, 'final');
  await replaceDir(finalDir, (tmp) => models.save(tmp));
  return { steps, evals, finalDir, lastStep: step, best: selection.best };

  async function checkpoint(at: number) {
    const dir = await writeCheckpoint(outDir, at, async (tmp) => {
      await models.save(join(tmp, 'policy'));
      await optimizer.save(tmp);
      if (userOptimizer) {
        makeDir(join(tmp, 'user-optimizer'));
        await userOptimizer.save(join(tmp, 'user-optimizer'));
      }
      await writeFileAtomic(join(tmp, 'trainer.json'), JSON.stringify({ step: at, version: model.version() }));
    });
    opts.onCheckpoint?.(dir, at);
  }
}

async function saveModels(model: TrainablePolicy, user: TrainablePolicy | undefined, dir: string): Promise<void> {
  await model.save(dir);
  if (user) await user.save(join(dir, 'user'));
}

/**
 * The user's update on a rollout batch: each episode as the user lived it (roleView: its own
 * prompts, the agent's messages as what it heard, its sampled ids), its reward the scenario's for
 * the user, then the same update as the agent's on those samples alone — so its advantages are
 * normalized among its own samples, never against the agent's.
 */
async function updateUser(
  user: TrainablePolicy,
  policy: Policy,
  ref: Scorer | null,
  optimizer: AdamW,
  config: TrainConfig,
  records: readonly EpisodeRecord[],
  shuffleSeed: number,
  scenario: Scenario,
): Promise<UpdateMetrics & { reward: number; episodes: number }> {
  const role = scenario.user!;
  const encode = policy.encode;
  if (!encode) throw new TrainingError(`the user's policy ${policy.id} does not tokenize: it cannot be trained`);
  const tools = role.tools.map(toOpenAITool);
  const views = records.flatMap((r) => {
    if (r.status !== 'ok') return [];
    const view = roleView(r, 'user', {
      encode: (messages) => encode.prompt(messages, tools),
      ...(role.reward ? { reward: (rec: EpisodeRecord) => role.reward!(rec.outcome, rec) } : {}),
    });
    return view ? [view] : [];
  });
  const { sequences } = buildTrajectories(views);
  const update = await updateOnBatch(user, ref, optimizer, config, sequences, shuffleSeed);
  return { ...update, reward: mean(views.map((v) => v.totalReward)), episodes: views.length };
}
