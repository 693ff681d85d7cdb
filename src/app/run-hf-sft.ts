import type { EpisodeConfig } from '../core/types.ts';
import { openAITools } from '../episode/drive-episode.ts';
import type { HfPolicy } from '../policy/hf/hf-policy.ts';
import type { Policy } from '../policy/policy.ts';
import { sequencesFromRecords } from '../policy/tfjs/sft.ts';
import type { LoraRequest } from '../rl/hf-trainable.ts';
import { hfSft } from './records-sft.ts';
import { TrainingError } from '../rl/errors.ts';
import { rollout } from '../rollout/rollout.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import type { Scenario } from '../scenario/scenario.ts';

export interface RunHfSftOptions {
  scenario: Scenario;
  /** The reference policy whose episodes are cloned. */
  teacher: Policy;
  /** The Hugging Face folder (or checkpoint of one) to start from. */
  init: string;
  /** Train LoRA adapters (seeded by `seed`) rather than every weight. */
  lora?: LoraRequest;
  episodes: number;
  seed: number;
  out: string;
  steps: number;
  batchSize: number;
  /** Sequences per forward pass (default 1). */
  microbatch?: number;
  lr: number;
  /** Dev-split episodes evaluated at the end (0: none). */
  evalEpisodes: number;
  /** The temperature the checkpoint samples with (saved with it; the dev eval uses it). */
  temperature: number;
  episode?: Partial<EpisodeConfig>;
  /** Threads of the training kernels (default: every core). */
  threads?: number;
  onPhase?: (phase: 'collect' | 'train' | 'save' | 'eval', detail: { [key: string]: unknown }) => void;
  onStep?: (stats: { step: number; steps: number; loss: number; tokensPerS: number }) => void;
  onEvalRecord?: (done: number, total: number) => void;
}

export interface RunHfSftResult {
  hash: string;
  steps: number;
  finalLoss: number;
  tailLoss: number;
  sequences: number;
  trainTokens: number;
  seconds: number;
  teacherSuccess: number;
  policy: HfPolicy;
  eval?: RolloutSummary;
}

/**
 * `agent-r1 sft --init hf:DIR`: a Hugging Face model cloned on a reference policy's demonstrations,
 * rendered through the model's own chat template with the scenario's tools (the loss on the
 * assistant's tokens alone, its end-of-turn token included), saved as a checkpoint that is the
 * Hugging Face folder it is, evaluated on dev. Deterministic for a seed.
 */
export async function runHfSft(options: RunHfSftOptions): Promise<RunHfSftResult> {
  options.onPhase?.('collect', { episodes: options.episodes, split: 'train' });
  const { records, summary } = await rollout({
    scenario: options.scenario,
    policy: options.teacher,
    split: 'train',
    episodes: options.episodes,
    seed: options.seed,
    config: options.episode,
  });
  options.onPhase?.('train', { records: records.length, teacherSuccess: summary.successRate });
  const trained = await hfSft(
    {
      init: options.init,
      ...(options.lora ? { lora: options.lora } : {}),
      seed: options.seed,
      out: options.out,
      steps: options.steps,
      batchSize: options.batchSize,
      ...(options.microbatch === undefined ? {} : { microbatch: options.microbatch }),
      lr: options.lr,
      threads: options.threads,
      temperature: options.temperature,
      meta: { scenario: options.scenario.id, teacher: options.teacher.id, episodes: options.episodes },
      ...(options.episode?.context === undefined ? {} : { context: options.episode.context }),
      onStep: options.onStep,
    },
    async (trainable) => {
      const sequences = sequencesFromRecords(records, trainable.encoding.withTools(openAITools(options.scenario)), {
        onlySuccessful: true,
      });
      if (sequences.length === 0)
        throw new TrainingError(`the ${options.teacher.id} policy produced no successful demonstration`);
      return sequences;
    },
  );
  options.onPhase?.('save', { out: options.out });
  const { trainable, ...figures } = trained;
  const policy = trainable.policy({ temperature: options.temperature }) as HfPolicy;
  const result: RunHfSftResult = { ...figures, teacherSuccess: summary.successRate, policy };
  if (options.evalEpisodes > 0) {
    const split = options.scenario.splits.includes('dev') ? 'dev' : 'train';
    options.onPhase?.('eval', { episodes: options.evalEpisodes, split });
    let done = 0;
    result.eval = (
      await rollout({
        scenario: options.scenario,
        policy,
        split,
        episodes: options.evalEpisodes,
        seed: options.seed + 1,
        config: options.episode,
        onRecord: () => options.onEvalRecord?.(++done, options.evalEpisodes),
      })
    ).summary;
  }
  return result;
}
