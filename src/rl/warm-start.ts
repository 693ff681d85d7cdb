import { performance } from 'node:perf_hooks';
import { deriveSeed } from '../core/rng.ts';
import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import type { GradientExecutor } from '../policy/tfjs/data-parallel.ts';
import type { ModelConfig } from '../architectures/gpt/model-config.ts';
import { type ContextCut, trainSft } from '../policy/tfjs/sft.ts';
import type { Chunking } from '../policy/tfjs/tokenizer.ts';
import { rollout } from '../rollout/rollout.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { roleView } from '../record/role-view.ts';
import { TrainingError } from './errors.ts';
import { GptTrainable } from './tfjs-trainable.ts';

/**
 * The supervised warm start ("Base Tool Call"): episodes from a demonstration policy, a tokenizer
 * trained on their text, and a fresh GPT trained to imitate every demonstration — the imperfect
 * ones too (a noisy expert that answers after too few searches, or answers a distractor), which
 * is what leaves RL room to improve on it.
 */
export interface WarmStartOptions {
  scenario: Scenario;
  demoPolicy: Policy;
  /** Demonstration episodes. */
  episodes: number;
  seed: number;
  split?: string;
  vocabSize?: number;
  /** Tokenizer pre-tokenization (default `words`, so that names can be copied). */
  chunking?: Chunking;
  model?: Partial<Omit<ModelConfig, 'vocabSize'>>;
  /** Optimizer steps. */
  steps: number;
  batchSize?: number;
  lr?: number;
  warmupSteps?: number;
  weightDecay?: number;
  /** Imitate only the demonstrations that succeeded (default false: all of them). */
  onlySuccessful?: boolean;
  /** Sequences per micro-batch (see SftOptions.microBatch). */
  microBatch?: number;
  /** Model replicas in other threads that compute the micro-batch gradients (same weights, less time). */
  replicas?: GradientExecutor;
  episode?: Partial<EpisodeConfig>;
  /** Who plays the scenario's user in the demonstrations (a scenario with a user; default: its own). */
  userPolicy?: Policy;
  onStep?(stats: { step: number; steps: number; loss: number; tokensPerS: number }): void;
}

export interface WarmStartResult {
  trainable: GptTrainable;
  demos: RolloutSummary;
  /** The demonstrations played (a user's warm start reads its view of them: userWarmStart). */
  records: readonly EpisodeRecord[];
  /** Demonstrations (episodes) trained on, and their share that succeeded. */
  demonstrations: number;
  demoSuccess: number;
  /** Training sequences: one per demonstration, or one per step of a step-level one. */
  sequences: number;
  /** Demonstrations the model's context cut (their last actions lost), when any were. */
  cut?: ContextCut;
  steps: number;
  finalLoss: number;
  seconds: number;
  parameters: number;
}

/**
 * The warm start's demonstrator when none is named: `noisy-expert` (imperfect demonstrations leave
 * the RL step something to learn), else a scenario author's `expert` alone (SFT on it, then RL on
 * what the imitation still gets wrong), else none.
 */
export function defaultDemoPolicy(scenario: Pick<Scenario, 'policies'>): string | undefined {
  if (Object.hasOwn(scenario.policies, 'noisy-expert')) return 'noisy-expert';
  return Object.hasOwn(scenario.policies, 'expert') ? 'expert' : undefined;
}

export async function sftWarmStart(options: WarmStartOptions): Promise<WarmStartResult> {
  const t0 = performance.now();
  const { records, summary } = await rollout({
    scenario: options.scenario,
    policy: options.demoPolicy,
    split: options.split ?? 'train',
    episodes: options.episodes,
    seed: deriveSeed(options.seed, 'demos'),
    concurrency: 16,
    config: options.episode,
    ...(options.userPolicy ? { userPolicy: options.userPolicy } : {}),
    onRecord: () => {},
  });
  return warmStartOnRecords(records, { id: options.demoPolicy.id, summary }, options, t0);
}

/** The SFT settings of a warm start (everything but where the demonstrations come from). */
export type WarmStartTraining = Omit<WarmStartOptions, 'scenario' | 'demoPolicy' | 'episodes' | 'split' | 'episode'>;

/** The warm start on demonstrations already played (an agent's, through the gateway): a tokenizer, a GPT, SFT. */
export async function warmStartOnRecords(
  records: readonly EpisodeRecord[],
  demos: { id: string; summary: RolloutSummary },
  options: WarmStartTraining,
  t0 = performance.now(),
): Promise<WarmStartResult> {
  const summary = demos.summary;
  const used: EpisodeRecord[] = records.filter(
    (r) => r.status === 'ok' && (!options.onlySuccessful || r.outcome.success),
  );
  if (used.length === 0) throw new TrainingError(`the ${demos.id} policy produced no usable demonstrations`);
  const trained = await trainSft({
    records: used,
    onlySuccessful: false,
    vocabSize: options.vocabSize ?? 768,
    chunking: options.chunking ?? 'words',
    model: options.model,
    seed: options.seed,
    steps: options.steps,
    batchSize: options.batchSize ?? 16,
    lr: options.lr ?? 3e-3,
    warmupSteps: options.warmupSteps ?? Math.min(10, Math.ceil(options.steps / 10)),
    weightDecay: options.weightDecay ?? 0.01,
    clipNorm: 1,
    microBatch: options.microBatch,
    replicas: options.replicas,
    onStep: (s) => options.onStep?.({ step: s.step, steps: s.totalSteps, loss: s.loss, tokensPerS: s.tokensPerSecond }),
  });
  const { model, tokenizer } = trained;
  const demoSuccess = used.filter((r) => r.outcome.success).length / used.length;
  return {
    trainable: await GptTrainable.create(model, tokenizer, {
      id: 'rl',
      meta: {
        warmStart: { demoPolicy: demos.id, episodes: used.length, steps: options.steps, demoSuccess },
      },
    }),
    demos: summary,
    records,
    demonstrations: used.length,
    sequences: trained.sequences,
    demoSuccess,
    steps: options.steps,
    finalLoss: trained.finalLoss,
    seconds: (performance.now() - t0) / 1000,
    parameters: model.parameterCount(),
    ...(trained.cut ? { cut: trained.cut } : {}),
  };
}

/** For step-level demonstrations, the sequences they make (one per step): ", 8231 sequences (one per step)". */
export function sequencesWords(ws: { demonstrations: number; sequences: number }): string {
  return ws.sequences > ws.demonstrations ? `, ${ws.sequences} sequences (one per step)` : '';
}

/**
 * The warm start of a scenario's user (a role trained beside the agent): a GPT of its own, SFT on
 * the user's view of the same demonstrations (roleView: its instructions, the agent's messages as
 * what it heard, its replies as its actions).
 */
export async function userWarmStart(
  records: readonly EpisodeRecord[],
  demos: { id: string; summary: RolloutSummary },
  options: WarmStartTraining,
): Promise<WarmStartResult> {
  const t0 = performance.now();
  const views = records.flatMap((r) => {
    const view = r.status === 'ok' ? roleView(r, 'user') : null;
    return view ? [view] : [];
  });
  if (views.length === 0) throw new TrainingError(`the user (${demos.id}) never spoke in the demonstrations`);
  return warmStartOnRecords(views, demos, options, t0);
}
