import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as tf from '@tensorflow/tfjs';
import { makeDir } from '../core/make-dir.ts';
import { deriveSeed } from '../core/rng.ts';
import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import { rollout } from '../rollout/rollout.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { devScore } from '../rl/best-checkpoint.ts';
import { resolveConfig, type Algorithm, type TrainConfig } from '../rl/config.ts';
import type { RolloutExecutor } from '../rollout/executor.ts';
import { canUseReplica, Replica } from '../rollout/replica.ts';
import { writeFileAtomic } from '../rl/run-dir.ts';
import { GptTrainable } from '../rl/tfjs-trainable.ts';
import { HfTrainable, type LoraRequest } from '../rl/hf-trainable.ts';
import { openAITools } from '../episode/drive-episode.ts';
import { sequencesFromRecords } from '../policy/tfjs/sft.ts';
import { hfSft } from './records-sft.ts';
import { trainReplicas } from '../rl/train-threads.ts';
import type { GradientExecutor } from '../policy/tfjs/data-parallel.ts';
import { train, type EvalMetrics, type StepMetrics } from '../rl/trainer.ts';
import type { TrainablePolicy } from '../rl/trainable.ts';
import { naiveRagModel, type TokenizingPolicy } from './naive-rag.ts';
import { referencePolicy } from '../scenario/reference-policy.ts';
import {
  sequencesWords,
  sftWarmStart,
  userWarmStart,
  type WarmStartOptions,
  type WarmStartResult,
} from '../rl/warm-start.ts';
import { resolveUserPolicy } from './resolve-policy.ts';
import type { ContextCut } from '../policy/tfjs/sft.ts';

/**
 * The paper's comparison in miniature: Naive RAG (one retrieval, then read), Base Tool Call (the
 * SFT warm start, no RL) and RL-trained agents, all evaluated greedily on the same `test` and `ood`
 * episodes. Used by `npm start` and bench/paper-table.ts.
 */

export interface MethodScore {
  method: string;
  split: string;
  episodes: number;
  em: number;
  f1: number;
  /** Share of episodes whose outcome was a success (for QA: EM = 1). */
  successRate: number;
  /** Mean share of the gold documents retrieved, where the scenario reports it (multihop QA). */
  recall?: number;
  /** EM per question type. */
  byType: { [type: string]: { n: number; em: number; f1: number } };
  meanTurns: number;
  /**
   * sha256 over the episodes' record checksums, in order: equal digests mean byte-identical
   * episodes (the same tasks, generations, observations and rewards). Absent for unsealed records.
   */
  digest?: string;
}

export interface PaperEvent {
  phase: 'baseline' | 'warm-start' | 'sft-step' | 'rl-step' | 'rl-eval' | 'eval';
  message?: string;
  step?: StepMetrics;
  eval?: EvalMetrics;
  sft?: { step: number; steps: number; loss: number; tokensPerS: number };
  algo?: Algorithm;
}

export interface PaperOptions {
  scenario: Scenario;
  seed: number;
  algos: readonly Algorithm[];
  outDir: string;
  warmStart: Omit<WarmStartOptions, 'scenario' | 'demoPolicy' | 'seed' | 'onStep' | 'replicas'> & {
    demoPolicy: string;
  };
  /** RL settings on top of each algorithm's defaults (steps, group, lr, …). */
  rl: Partial<Omit<TrainConfig, 'algo' | 'seed'>>;
  /**
   * Which policy of each RL run the table evaluates: 'final' (the last step's, the default) or
   * 'best-dev' (the one of its best dev eval after step 0, ties to the later step — model selection
   * on dev, never on test). 'best-dev' needs dev evals (rl.evalEvery > 0).
   */
  select?: PolicySelection;
  /**
   * Scripted reference rows: the scenario's policies by name, evaluated like the methods (an expert
   * shows what perfect play scores; the demonstrator what the warm start imitates).
   */
  references?: readonly {
    method: string;
    policy: string /** Who plays the scenario's user (default: its own). */;
    user?: string;
  }[];
  /** Episodes per evaluation split: a number, or 'all' (one per task of the split). */
  evalEpisodes: { test: EvalEpisodes; ood: EvalEpisodes };
  evalSplits?: readonly string[];
  /** Episode budget overrides for every rollout (demonstrations, training, evaluation). */
  episode?: Partial<EpisodeConfig>;
  /**
   * Train this Hugging Face model (hf:DIR, or ckpt:DIR of one) instead of a new GPT: its warm start
   * is SFT on the same demonstrations through its own chat template (`hfWarmStart`'s settings, the
   * GPT's tokenizer and model settings not applying), then the same RL and evaluations.
   */
  hf?: HfWarmStart;
  /**
   * A warm-start checkpoint made by an earlier run with the same seed and budget: loaded instead of
   * trained (the same weights, since the warm start is deterministic), so algorithms can run in
   * separate processes without repeating the SFT.
   */
  warmStartFrom?: string;
  /**
   * Play the model's episodes (training, dev evals, evaluations) on two threads, half on a replica
   * in a worker thread (wasm and cpu backends; see Replica). Same records, shorter wall time.
   */
  replica?: boolean;
  /** How the replica's thread loads the scenario: a built-in name or a folder (default: its id). */
  scenarioSource?: string;
  /**
   * Threads that compute the warm start's and the RL updates' gradients, each on a replica of the
   * model (default 1: this thread; see TrainThreads). The same weights come out, in less time.
   */
  trainThreads?: number;
  /**
   * Train the scenario's user too (a game of two roles): the demonstrations play the user policy
   * `demoPolicy` (one of the scenario's user policies), the user's warm start is a GPT of its own SFT
   * on its view of them, and each algorithm gives two rows: the agent trained against that warm user
   * kept fixed, and both roles co-trained (`train --roles agent,user`). The built-in GPT only.
   */
  user?: { demoPolicy: string /** The user's SFT steps (default: the agent's). */; steps?: number };
  onEvent?(event: PaperEvent): void;
}

/** A Hugging Face model's warm start: the model, LoRA or every weight, and its SFT settings. */
/** The Hugging Face model a job trains (`--init`, `--lora`, `--train-threads`). */
export interface HfModelRequest {
  init: string;
  lora?: LoraRequest;
  /** Threads of the training kernels, SFT and RL (default: every core). */
  threads?: number;
}

export interface HfWarmStart extends HfModelRequest {
  steps: number;
  batchSize: number;
  /** Sequences per forward pass (default: all of a step's, one pass). */
  microbatch?: number;
  lr: number;
}

export interface PaperResult {
  scores: MethodScore[];
  /** dev EM vs step, per algorithm (from the trainer's evals). */
  curves: { algo: Algorithm; step: number; em: number; reward: number; coTrained?: true }[];
  /** Mean training reward per step, per algorithm. */
  rewards: { algo: Algorithm; step: number; reward: number; coTrained?: true }[];
  warmStart: Omit<WarmStartResult, 'trainable' | 'demos' | 'records'> & { dir: string };
  /** The user's warm start, when the run trains the scenario's user (PaperOptions.user). */
  userWarmStart?: Omit<WarmStartResult, 'trainable' | 'demos' | 'records'> & { dir: string };
  runDirs: { [algo: string]: string };
  /** The RL step whose policy the table evaluates, per algorithm, and its dev score. */
  selected: { [algo: string]: { step: number; devScore: number | null } };
  seconds: { [phase: string]: number };
}

const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

export function scoreRecords(method: string, split: string, records: readonly EpisodeRecord[]): MethodScore {
  const em = (r: EpisodeRecord) => r.outcome.metrics?.em ?? (r.outcome.success ? 1 : 0);
  const f1 = (r: EpisodeRecord) => r.outcome.metrics?.f1 ?? em(r);
  const types = new Map<string, EpisodeRecord[]>();
  for (const r of records) {
    const t = r.task.type ?? 'other';
    if (!types.has(t)) types.set(t, []);
    types.get(t)!.push(r);
  }
  const byType = Object.fromEntries(
    [...types.keys()].sort().map((t) => {
      const rs = types.get(t)!;
      return [t, { n: rs.length, em: mean(rs.map(em)), f1: mean(rs.map(f1)) }];
    }),
  );
  const recalls = records.map((r) => r.outcome.metrics?.recall).filter((x): x is number => Number.isFinite(x));
  const sealed = records.length > 0 && records.every((r) => typeof r.checksum === 'string');
  return {
    method,
    split,
    episodes: records.length,
    em: mean(records.map(em)),
    f1: mean(records.map(f1)),
    successRate: mean(records.map((r) => (r.outcome.success ? 1 : 0))),
    ...(recalls.length === records.length && records.length > 0 ? { recall: mean(recalls) } : {}),
    byType,
    meanTurns: mean(records.map((r) => r.turns.length)),
    ...(sealed
      ? {
          digest: createHash('sha256')
            .update(records.map((r) => r.checksum).join('\n'))
            .digest('hex'),
        }
      : {}),
  };
}

export type EvalEpisodes = number | 'all';
export type PolicySelection = 'final' | 'best-dev';

/**
 * How many evaluation episodes `n` is on a split: 'all' is one per task, for scenarios whose splits
 * are fixed sets (they say how many tasks: `taskCount`); a generated split has no "all".
 */
export function evalEpisodeCount(scenario: Scenario, split: string, n: EvalEpisodes): number {
  if (n !== 'all') return n;
  if (!scenario.taskCount)
    throw new RangeError(
      `scenario ${scenario.id} generates its "${split}" tasks, so "all" has no end; give a number of episodes`,
    );
  const count = scenario.taskCount(split);
  if (count === 0) throw new RangeError(`scenario ${scenario.id} has no tasks in split "${split}"`);
  return count;
}

/** The evaluation episodes of a split: every method sees the same tasks with the same seeds. */
function evalRollout(
  scenario: Scenario,
  split: string,
  episodes: number,
  seed: number,
  episode?: Partial<EpisodeConfig>,
) {
  return { scenario, split, episodes, seed: deriveSeed(seed, 'paper-eval', split), concurrency: 64, config: episode };
}

/** Greedy evaluation of any policy (a scripted baseline) on the split's fixed episodes. */
export async function evaluateMethod(
  scenario: Scenario,
  method: string,
  policy: Policy,
  split: string,
  episodes: number,
  seed: number,
  episode?: Partial<EpisodeConfig>,
  /** Who plays the scenario's user (default: its own). */
  userPolicy?: Policy,
): Promise<MethodScore> {
  const { records } = await rollout({
    ...evalRollout(scenario, split, episodes, seed, episode),
    policy,
    ...(userPolicy ? { userPolicy } : {}),
  });
  return scoreRecords(method, split, records);
}

/** Greedy evaluation of a trainable model, played by `executor` (in this thread by default). */
export async function evaluateModel(
  scenario: Scenario,
  method: string,
  model: TrainablePolicy,
  split: string,
  episodes: number,
  seed: number,
  episode?: Partial<EpisodeConfig>,
  executor?: RolloutExecutor,
  /** Who plays the scenario's user (default: its own). */
  userPolicy?: Policy,
): Promise<MethodScore> {
  const policy = model.policy({ temperature: 0 });
  const { records } = await rollout({
    ...evalRollout(scenario, split, episodes, seed, episode),
    policy,
    executor,
    ...(userPolicy ? { userPolicy } : {}),
  });
  return scoreRecords(method, split, records);
}

export const METHOD_NAMES: Record<Algorithm | 'naive-rag' | 'oracle-reader' | 'base', string> = {
  'naive-rag': 'Naive RAG',
  'oracle-reader': 'One retrieval, oracle reader',
  base: 'Base Tool Call',
  ppo: 'PPO',
  grpo: 'GRPO',
  'reinforce++': 'REINFORCE++',
  rloo: 'RLOO',
};

export async function runPaper(options: PaperOptions): Promise<PaperResult> {
  const backend = tf.getBackend();
  // A worker thread's replica and the training threads copy the GPT: a Hugging Face model runs here.
  const replica =
    // A user played by a model of this thread (PaperOptions.user) keeps every episode here too.
    options.replica && !options.hf && !options.user && canUseReplica(backend)
      ? new Replica({
          backend,
          scenarioSource: options.scenarioSource,
          onFallback: (e) =>
            options.onEvent?.({
              phase: 'eval',
              message: `the replica failed (its episodes were played on the main thread): ${e.message}`,
            }),
        })
      : undefined;
  const training = trainReplicas(backend, options.hf ? 1 : (options.trainThreads ?? 1));
  if (training.note) options.onEvent?.({ phase: 'warm-start', message: training.note });
  try {
    return await runPaperWith(options, replica, training.replicas);
  } finally {
    await replica?.close();
    await training.replicas?.close();
  }
}

async function runPaperWith(
  options: PaperOptions,
  executor: RolloutExecutor | undefined,
  replicas: GradientExecutor | undefined,
): Promise<PaperResult> {
  const { scenario, seed } = options;
  const emit = (e: PaperEvent) => options.onEvent?.(e);
  const splits = options.evalSplits ?? ['test', 'ood'];
  const count = (split: string) =>
    evalEpisodeCount(scenario, split, split === 'ood' ? options.evalEpisodes.ood : options.evalEpisodes.test);
  // an evaluation size the scenario cannot give fails now, not after the warm start
  for (const split of splits) count(split);
  if (options.user && (options.hf || options.warmStartFrom))
    throw new RangeError("training the user beside the agent needs the built-in GPT's own warm start");
  const select = options.select ?? 'final';
  if (select === 'best-dev' && resolveConfig({ ...options.rl, algo: 'grpo', seed }).evalEvery === 0) {
    throw new RangeError('selecting the best dev checkpoint needs dev evals: set rl.evalEvery > 0');
  }
  const seconds: { [phase: string]: number } = {};
  const scores: MethodScore[] = [];
  // The model each RL run starts from, and each checkpoint evaluated: the job's kind of model.
  const reload = (dir: string, id: string): Promise<GptTrainable | HfTrainable> =>
    options.hf ? HfTrainable.load(dir, { id, threads: options.hf.threads }) : GptTrainable.fromCheckpoint(dir, { id });
  makeDir(options.outDir);
  let t = performance.now();
  const lap = (phase: string) => {
    const now = performance.now();
    seconds[phase] = (seconds[phase] ?? 0) + (now - t) / 1000;
    t = now;
  };

  // The scenario's scripted one-retrieval reader answers from the observation perfectly: the ceiling
  // of any one-retrieval method, a reference row (the paper's Naive RAG is the model's, below).
  const oracle: MethodScore[] = [];
  if (Object.hasOwn(scenario.policies, 'naive-rag')) {
    const policy = await referencePolicy(scenario, 'naive-rag', seed);
    for (const split of splits)
      oracle.push(
        await evaluateMethod(
          scenario,
          METHOD_NAMES['oracle-reader'],
          policy,
          split,
          count(split),
          seed,
          options.episode,
        ),
      );
    emit({ phase: 'baseline', message: 'one retrieval with an oracle reader evaluated' });
  }
  lap('oracle-reader');

  const userDemo = options.user && (await resolveUserPolicy(options.user.demoPolicy, scenario, seed));
  const demoFactory = scenario.policies[options.warmStart.demoPolicy];
  if (!demoFactory)
    throw new Error(`scenario ${scenario.id} has no "${options.warmStart.demoPolicy}" policy for the warm start`);
  const ws = options.hf
    ? await hfWarmStart(options, await demoFactory({ scenario, seed }), (s) => emit({ phase: 'sft-step', sft: s }))
    : options.warmStartFrom
      ? await loadWarmStart(options.warmStartFrom)
      : await sftWarmStart({
          ...options.warmStart,
          episode: options.episode,
          scenario,
          demoPolicy: await demoFactory({ scenario, seed }),
          seed,
          replicas,
          ...(userDemo ? { userPolicy: userDemo } : {}),
          onStep: (s) => emit({ phase: 'sft-step', sft: s }),
        });
  // Said, not silent: demonstrations the context cut lost their last actions.
  const cut = 'cut' in ws ? (ws.cut as ContextCut | undefined) : undefined;
  const warmDir = join(options.outDir, 'warm-start');
  await ws.trainable.save(warmDir);
  // The user's warm start: its own GPT on its view of the same demonstrations, saved in warm-start/user.
  const userWs =
    userDemo && 'records' in ws
      ? await userWarmStart(
          (ws as WarmStartResult).records,
          { id: userDemo.id, summary: (ws as WarmStartResult).demos },
          {
            ...options.warmStart,
            steps: options.user!.steps ?? options.warmStart.steps,
            seed,
            replicas,
            onStep: (s) => emit({ phase: 'sft-step', sft: s }),
          },
        )
      : undefined;
  const userWarmDir = join(warmDir, 'user');
  if (userWs) {
    await userWs.trainable.save(userWarmDir);
    emit({
      phase: 'warm-start',
      message: `the user's warm start: its view of ${userWs.demonstrations} demonstrations, ${userWs.steps} SFT steps, loss ${userWs.finalLoss.toFixed(3)}`,
    });
  }
  // Who plays the user in the model's evaluations: the warm user (greedy), or the scenario's own.
  const warmUser = userWs?.trainable.policy({ temperature: 0 });
  lap('warm-start');
  emit({
    phase: 'warm-start',
    message: options.warmStartFrom
      ? `warm start loaded from ${options.warmStartFrom}`
      : `warm start: ${ws.demonstrations} demonstrations (${(ws.demoSuccess * 100).toFixed(0)}% correct)${sequencesWords(ws)}, ${ws.steps} SFT steps, loss ${ws.finalLoss.toFixed(3)}` +
        (cut
          ? `; ${cut.sequences} of them cut at the context of ${cut.contextLength} tokens (the longest: ${cut.longest})`
          : ''),
  });
  // The paper's Naive RAG: the warm-start model, its one retrieval forced to the question.
  const base = ws.trainable.policy({ temperature: 0 });
  if (!options.hf && scenario.tools.some((t) => t.name === 'search') && 'tokenizer' in base) {
    const policy = naiveRagModel(base as TokenizingPolicy);
    for (const split of splits)
      scores.push(
        await evaluateMethod(scenario, METHOD_NAMES['naive-rag'], policy, split, count(split), seed, options.episode),
      );
    emit({ phase: 'eval', message: 'Naive RAG (the model, one forced retrieval) evaluated' });
  }
  scores.push(...oracle);
  lap('naive-rag');
  if (options.references?.length) {
    for (const { method, policy: name, user } of options.references) {
      const policy = await referencePolicy(scenario, name, seed);
      const userPolicy = user === undefined ? undefined : await resolveUserPolicy(user, scenario, seed);
      for (const split of splits)
        scores.push(
          await evaluateMethod(scenario, method, policy, split, count(split), seed, options.episode, userPolicy),
        );
    }
    emit({ phase: 'baseline', message: 'scripted references evaluated' });
    lap('references');
  }
  for (const split of splits)
    scores.push(
      await evaluateModel(
        scenario,
        METHOD_NAMES.base,
        ws.trainable,
        split,
        count(split),
        seed,
        options.episode,
        executor,
        warmUser,
      ),
    );
  lap('eval-base');
  emit({ phase: 'eval', message: 'Base Tool Call evaluated' });

  const curves: PaperResult['curves'] = [];
  const rewards: PaperResult['rewards'] = [];
  const runDirs: { [algo: string]: string } = {};
  const selected: PaperResult['selected'] = {};
  // Each algorithm's runs: the agent alone (against the warm user, kept fixed, when there is one),
  // and, for a game of two roles, both roles co-trained.
  const runs = options.algos.flatMap((algo) =>
    userWs
      ? [
          { algo, key: algo, method: `${METHOD_NAMES[algo]} (agent; the user fixed)`, coTrained: false },
          {
            algo,
            key: `${algo}-co-trained`,
            method: `${METHOD_NAMES[algo]} co-trained (agent + user)`,
            coTrained: true,
          },
        ]
      : [{ algo, key: algo, method: METHOD_NAMES[algo], coTrained: false }],
  );
  for (const { algo, key, method, coTrained } of runs) {
    const model = await reload(warmDir, `rl-${key}`);
    const user = coTrained ? await GptTrainable.fromCheckpoint(userWarmDir, { id: `rl-${key}-user` }) : undefined;
    const outDir = join(options.outDir, key);
    runDirs[key] = outDir;
    const config = resolveConfig({ ...options.rl, algo, seed });
    const result = await train({
      scenario,
      model,
      config,
      outDir,
      init: `ckpt:${warmDir}`,
      episode: options.episode,
      executor,
      replicas,
      ...(user ? { user } : warmUser ? { userPolicy: warmUser } : {}),
      onStep: (m) => emit({ phase: 'rl-step', step: m, algo }),
      onEval: (e) => emit({ phase: 'rl-eval', eval: e, algo }),
    });
    for (const e of result.evals)
      curves.push({ algo, step: e.step, em: devScore(e), reward: e.reward, ...(coTrained ? { coTrained } : {}) });
    for (const s of result.steps)
      rewards.push({ algo, step: s.step, reward: s.reward, ...(coTrained ? { coTrained } : {}) });
    lap(`train-${key}`);
    // best-dev: the best checkpoint, unless it is the final policy (in memory) or there is none (no eval after step 0)
    const best = select === 'best-dev' && result.best && result.best.step !== result.lastStep ? result.best : null;
    const finalEval = result.evals.find((e) => e.step === result.lastStep);
    selected[key] = best
      ? { step: best.step, devScore: best.devScore }
      : { step: result.lastStep, devScore: finalEval ? devScore(finalEval) : null };
    const chosen = best ? await reload(best.dir, `rl-${key}`) : model;
    // A co-trained user is evaluated as it was at the chosen step (best/user beside best/).
    const chosenUser =
      user && best ? await GptTrainable.fromCheckpoint(join(best.dir, 'user'), { id: `rl-${key}-user` }) : user;
    if (best)
      emit({
        phase: 'eval',
        algo,
        message: `${key}: evaluating the best dev checkpoint, step ${best.step} (dev ${(100 * best.devScore).toFixed(1)})`,
      });
    try {
      const evalUser = chosenUser ? chosenUser.policy({ temperature: 0 }) : warmUser;
      for (const split of splits)
        scores.push(
          await evaluateModel(scenario, method, chosen, split, count(split), seed, options.episode, executor, evalUser),
        );
    } finally {
      if (chosen !== model) dispose(chosen);
      dispose(model);
      if (chosenUser && chosenUser !== user) dispose(chosenUser);
      if (user) dispose(user);
    }
    lap(`eval-${key}`);
  }
  dispose(ws.trainable);
  if (userWs) dispose(userWs.trainable);
  const result: PaperResult = {
    scores,
    curves,
    rewards,
    warmStart: {
      demonstrations: ws.demonstrations,
      sequences: ws.sequences,
      demoSuccess: ws.demoSuccess,
      steps: ws.steps,
      finalLoss: ws.finalLoss,
      seconds: ws.seconds,
      parameters: ws.parameters,
      dir: warmDir,
    },
    ...(userWs
      ? {
          userWarmStart: {
            demonstrations: userWs.demonstrations,
            sequences: userWs.sequences,
            demoSuccess: userWs.demoSuccess,
            steps: userWs.steps,
            finalLoss: userWs.finalLoss,
            seconds: userWs.seconds,
            parameters: userWs.parameters,
            dir: userWarmDir,
          },
        }
      : {}),
    runDirs,
    selected,
    seconds,
  };
  await writeFileAtomic(join(options.outDir, 'paper.json'), JSON.stringify(result, null, 2) + '\n');
  return result;
}

function dispose(model: GptTrainable | HfTrainable): void {
  if (model instanceof HfTrainable) model.dispose();
  else model.model.dispose();
}

/**
 * The warm start of a Hugging Face model: the same demonstrations as the GPT's (the demo policy's
 * episodes on train, seeded alike), rendered with the model's own template and the scenario's tools,
 * every one imitated (the imperfect ones too, as the GPT's warm start does).
 */
async function hfWarmStart(
  options: PaperOptions,
  demoPolicy: Policy,
  onStep: (s: { step: number; steps: number; loss: number; tokensPerS: number }) => void,
): Promise<Omit<WarmStartResult, 'demos' | 'trainable' | 'records'> & { trainable: HfTrainable }> {
  const hf = options.hf!;
  const t0 = performance.now();
  const { records, summary } = await rollout({
    scenario: options.scenario,
    policy: demoPolicy,
    split: 'train',
    episodes: options.warmStart.episodes,
    seed: deriveSeed(options.seed, 'demos'),
    concurrency: 16,
    config: options.episode,
  });
  const used = records.filter((r) => r.status === 'ok' && (!options.warmStart.onlySuccessful || r.outcome.success));
  const out = join(options.outDir, 'warm-start');
  const trained = await hfSft(
    {
      init: hf.init,
      ...(hf.lora ? { lora: hf.lora } : {}),
      seed: options.seed,
      out,
      steps: hf.steps,
      batchSize: hf.batchSize,
      microbatch: hf.microbatch ?? hf.batchSize,
      lr: hf.lr,
      threads: hf.threads,
      temperature: 0,
      meta: { scenario: options.scenario.id, teacher: demoPolicy.id, episodes: records.length },
      ...(options.episode?.context === undefined ? {} : { context: options.episode.context }),
      onStep,
    },
    async (model) => sequencesFromRecords(used, model.encoding.withTools(openAITools(options.scenario))),
  );
  return {
    trainable: trained.trainable,
    demonstrations: records.length,
    demoSuccess: summary.successRate,
    sequences: trained.sequences,
    steps: trained.steps,
    finalLoss: trained.finalLoss,
    seconds: (performance.now() - t0) / 1000,
    parameters: trained.parameters,
  };
}

/** A saved warm start, with the figures its run recorded (paper.json next to it, when there is one). */
async function loadWarmStart(
  dir: string,
): Promise<
  Pick<
    WarmStartResult,
    'trainable' | 'demonstrations' | 'sequences' | 'demoSuccess' | 'steps' | 'finalLoss' | 'seconds' | 'parameters'
  >
> {
  const trainable = await GptTrainable.fromCheckpoint(dir, { id: 'rl' });
  let recorded: Partial<PaperResult['warmStart']> = {};
  try {
    recorded = (JSON.parse(await readFile(join(dir, '..', 'paper.json'), 'utf8')) as PaperResult).warmStart;
  } catch {
    // no paper.json beside it: only the parameter count is known
  }
  return {
    trainable,
    demonstrations: recorded.demonstrations ?? recorded.sequences ?? 0,
    sequences: recorded.sequences ?? 0,
    demoSuccess: recorded.demoSuccess ?? 0,
    steps: recorded.steps ?? 0,
    finalLoss: recorded.finalLoss ?? NaN,
    seconds: 0,
    parameters: trainable.model.parameterCount(),
  };
}

/**
 * The table: one row per method, EM per type on test, EM/F1 overall on test, EM/F1 on ood, then
 * gold-document recall on test and ood where the scores carry it (search apart from reading).
 */
/** The table as data: per method, EM and F1 in % on each split (overall and per question type). */
export function paperTableJson(scores: readonly MethodScore[], seconds: { [phase: string]: number }) {
  const pct = (x: number) => Math.round(x * 1000) / 10;
  const split = (s: MethodScore) => ({
    em: pct(s.em),
    f1: pct(s.f1),
    successRate: pct(s.successRate),
    byType: Object.fromEntries(
      Object.entries(s.byType).map(([type, v]) => [type, { n: v.n, em: pct(v.em), f1: pct(v.f1) }]),
    ),
  });
  const methods = [...new Set(scores.map((s) => s.method))].map((method) => ({
    method,
    ...Object.fromEntries(scores.filter((s) => s.method === method).map((s) => [s.split, split(s)])),
  }));
  return { methods, seconds: Object.fromEntries(Object.entries(seconds).map(([k, v]) => [k, Math.round(v)])) };
}

export function formatPaperTable(scores: readonly MethodScore[], metric: 'em' | 'success' = 'em'): string {
  if (metric === 'success') return formatSuccessTable(scores);
  const methods = [...new Set(scores.map((s) => s.method))];
  const get = (m: string, split: string) => scores.find((s) => s.method === m && s.split === split);
  const types = [...new Set(scores.filter((s) => s.split === 'test').flatMap((s) => Object.keys(s.byType)))].sort();
  const withRecall = scores.some((s) => s.recall !== undefined);
  const head = [
    'method',
    ...types.map((t) => `test:${t}`),
    'test EM',
    'test F1',
    'ood EM',
    'ood F1',
    ...(withRecall ? ['test recall', 'ood recall'] : []),
  ];
  const pct = (x: number | undefined) => (x === undefined ? '-' : (100 * x).toFixed(1));
  const rows = methods.map((m) => {
    const test = get(m, 'test');
    const ood = get(m, 'ood');
    const recall = withRecall ? [pct(test?.recall), pct(ood?.recall)] : [];
    return [
      m,
      ...types.map((t) => pct(test?.byType[t]?.em)),
      pct(test?.em),
      pct(test?.f1),
      pct(ood?.em),
      pct(ood?.f1),
      ...recall,
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** The table of a family scored by success (not EM): success in % per split, then per type on test. */
function formatSuccessTable(scores: readonly MethodScore[]): string {
  const methods = [...new Set(scores.map((s) => s.method))];
  const splits = [...new Set(scores.map((s) => s.split))];
  const get = (m: string, split: string) => scores.find((s) => s.method === m && s.split === split);
  const types = [...new Set(scores.filter((s) => s.split === 'test').flatMap((s) => Object.keys(s.byType)))].sort();
  const head = ['method', ...splits.map((s) => `${s} success`), ...types.map((t) => `test:${t}`), 'test turns'];
  const pct = (x: number | undefined) => (x === undefined ? '-' : (100 * x).toFixed(1));
  const rows = methods.map((m) => [
    m,
    ...splits.map((split) => pct(get(m, split)?.successRate)),
    ...types.map((t) => pct(get(m, 'test')?.byType[t]?.em)),
    get(m, 'test')?.meanTurns.toFixed(1) ?? '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
