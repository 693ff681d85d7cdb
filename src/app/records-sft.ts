import { canonicalJson } from '../core/canonical-json.ts';
import type { EpisodeRecord } from '../core/types.ts';
import { openAITools } from '../episode/drive-episode.ts';
import { agentSequences } from '../gateway/agent-sequences.ts';
import { chatFormatFor } from '../openai/chat-format.ts';
import type { HfPolicy } from '../policy/hf/hf-policy.ts';
import { sequencesFromRecords } from '../policy/tfjs/sft.ts';
import type { TokenSequence } from '../policy/trajectory.ts';
import { isAgentRecord } from '../record/agent.ts';
import { TrainingError } from '../rl/errors.ts';
import { HfTrainable, type LoraRequest } from '../rl/hf-trainable.ts';
import { sftTrainable } from '../rl/sft-trainable.ts';
import type { Scenario } from '../scenario/scenario.ts';

/** Which recorded episodes are imitated: those that succeeded, or those whose reward reaches `minReward`. */
export function imitated(records: readonly EpisodeRecord[], minReward?: number): EpisodeRecord[] {
  return records.filter(
    (r) => r.status === 'ok' && (minReward === undefined ? r.outcome.success : r.outcome.reward >= minReward),
  );
}

/**
 * Recorded episodes as SFT sequences on a Hugging Face model's own chat template: an agent's (the
 * gateway's: its requests with their tools, see agentSequences) and a scenario's (its prompt with the
 * scenario's tools). Answers are the records' text, encoded as this model writes it, whatever model
 * or demonstrator wrote them (a teacher's text-only records included).
 */
export async function recordSequences(
  trainable: HfTrainable,
  records: readonly EpisodeRecord[],
  scenarioOf: (record: EpisodeRecord) => Promise<Scenario> = (r) =>
    Promise.reject(new TrainingError(`episode ${r.episodeId} is a scenario's: name its scenario to render it`)),
): Promise<TokenSequence[]> {
  const action = (text: string) => trainable.encoding.action(text);
  const agent = records.filter(isAgentRecord);
  const out = agent.length > 0 ? agentSequences(agent, chatFormatFor(servedOf(trainable)), action) : [];
  const byScenario = new Map<string, EpisodeRecord[]>();
  for (const r of records) {
    if (isAgentRecord(r)) continue;
    const key = canonicalJson(r.scenario);
    byScenario.set(key, [...(byScenario.get(key) ?? []), r]);
  }
  for (const group of byScenario.values()) {
    const scenario = await scenarioOf(group[0]!);
    out.push(...sequencesFromRecords(group, trainable.encoding.withTools(openAITools(scenario))));
  }
  return out;
}

/** The greedy policy of a trainable Hugging Face model, as a chat format reads it (its template, its tokenizer). */
function servedOf(trainable: HfTrainable): HfPolicy {
  return trainable.policy({ temperature: 0 }) as HfPolicy;
}

export interface HfSftOptions {
  /** The Hugging Face folder (hf:DIR) or a checkpoint of one (ckpt:DIR) to start from. */
  init: string;
  lora?: LoraRequest;
  seed: number;
  out: string;
  steps: number;
  batchSize: number;
  microbatch?: number;
  lr: number;
  /** The temperature the checkpoint samples with (saved with it). */
  temperature: number;
  /** What the checkpoint's meta says the data was (its `sft` entry). */
  meta: { [key: string]: unknown };
  /** What each step was shown in the data (a scenario's context mode): the policy expects the same in use. */
  context?: string;
  /** Threads of the training kernels (default: every core); the weights are the same for any number. */
  threads?: number;
  onStep?: (stats: { step: number; steps: number; loss: number; tokensPerS: number }) => void;
}

export interface HfSftResult {
  hash: string;
  steps: number;
  finalLoss: number;
  tailLoss: number;
  sequences: number;
  trainTokens: number;
  seconds: number;
  /** The weights trained (every weight, or the adapters). */
  parameters: number;
  trainable: HfTrainable;
}

/**
 * A Hugging Face model trained on sequences made with it (`build`: recordSequences or a scenario's
 * demonstrations), saved as a checkpoint that is the Hugging Face folder it is. Deterministic for a seed.
 */
export async function hfSft(
  options: HfSftOptions,
  build: (trainable: HfTrainable) => Promise<TokenSequence[]>,
): Promise<HfSftResult> {
  const trainable = await HfTrainable.load(options.init.replace(/^(hf|ckpt):/, ''), {
    id: `ckpt:${options.out}`,
    lora: options.lora,
    seed: options.seed,
    threads: options.threads,
  });
  const sequences = await build(trainable);
  if (sequences.length === 0)
    throw new TrainingError('there is no episode to imitate (none succeeded, or none was given)');
  const trained = await sftTrainable(trainable, {
    sequences,
    steps: options.steps,
    batchSize: options.batchSize,
    ...(options.microbatch === undefined ? {} : { microbatch: options.microbatch }),
    lr: options.lr,
    seed: options.seed,
    onStep: options.onStep,
  });
  trainable.options.meta = {
    ...trainable.options.meta,
    sft: {
      init: options.init,
      ...options.meta,
      seed: options.seed,
      steps: trained.steps,
      finalLoss: trained.finalLoss,
    },
    sampling: { temperature: options.temperature },
    ...(options.context === undefined ? {} : { context: options.context }),
  };
  await trainable.save(options.out);
  const parameters = trainable.variables.reduce((n, v) => n + v.size, 0);
  return { hash: trainable.version(), ...trained, sequences: sequences.length, parameters, trainable };
}
