import { inCanonicalOrderCopy } from '../core/canonical-json.ts';
import { deepFreeze } from '../core/deep-freeze.ts';
import { deriveSeed } from '../core/rng.ts';
import {
  DEFAULT_EPISODE_CONFIG,
  RECORD_SCHEMA_VERSION,
  type EpisodeConfig,
  type EpisodeRecord,
  type Task,
} from '../core/types.ts';
import type { Policy } from '../policy/policy.ts';
import { sealRecord } from '../record/record.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { ToolRunner, type ToolCache } from '../tools/runner.ts';
import { toOpenAITool } from '../tools/tool.ts';
import {
  driveEpisode,
  openAITools,
  type DrivenEpisode,
  type EpisodeDrivers,
  type UserDrivers,
} from './drive-episode.ts';

export interface RunEpisodeOptions {
  scenario: Scenario;
  task: Task;
  policy: Policy;
  /** Who plays the scenario's user (a scenario with one): default, its `defaultPolicy`. */
  userPolicy?: Policy;
  /** The episode's seed; derive it with episodeSeed(runSeed, task.id, sample). */
  seed: number;
  index?: number;
  group?: string;
  sample?: number;
  runId?: string;
  config?: Partial<EpisodeConfig>;
  toolCache?: ToolCache;
  signal?: AbortSignal;
  /** Accumulates the time spent inside tools (for the rollout's time shares). */
  metrics?: { toolMs: number };
  /** The record's episode id (default `<task id>#<sample>`), e.g. one a remote client chose. */
  episodeId?: string;
  /** Told each turn's ToolEnv verdict as soon as it is known. */
  onStep?: EpisodeDrivers['onStep'];
}

/** The seed of one episode: a function of the run seed, the task and the sample index only. */
export function episodeSeed(runSeed: number, taskId: string, sample: number): number {
  return deriveSeed(runSeed, taskId, sample);
}

/** The episode budgets: the defaults, the scenario's, then the run's (keys in canonical order, as records write them). */
/**
 * An episode's config: the defaults, the scenario's, the policy's action format (how its model
 * writes tool calls) where it has one of its own, and the run's overrides.
 */
export function episodeConfig(
  scenario: Scenario,
  overrides?: Partial<EpisodeConfig>,
  policy?: Pick<Policy, 'actionFormat'>,
): EpisodeConfig {
  const format = policy?.actionFormat && policy.actionFormat !== 'tags' ? { actionFormat: policy.actionFormat } : {};
  return inCanonicalOrderCopy({ ...DEFAULT_EPISODE_CONFIG, ...scenario.episode, ...format, ...overrides });
}

/** Runs one live episode (the policy acts, the tools run) and returns its sealed record. */
export async function runEpisode(options: RunEpisodeOptions): Promise<EpisodeRecord> {
  const { scenario, task, policy, seed } = options;
  const config = episodeConfig(scenario, options.config, policy);
  const index = options.index ?? 0;
  const sample = options.sample ?? 0;
  const episodeId = options.episodeId ?? `${task.id}#${sample}`;
  const runner = new ToolRunner(scenario.tools, {
    timeoutMs: config.toolTimeoutMs,
    maxOutputChars: config.maxToolOutputChars,
    cache: options.toolCache,
    onToolTime: options.metrics ? (ms) => (options.metrics!.toolMs += ms) : undefined,
  });
  try {
    const userPolicy = scenario.user && (options.userPolicy ?? (await defaultUserPolicy(scenario, seed)));
    const driven = await driveEpisode(scenario, task, seed, config, {
      encode: policy.encode,
      signal: options.signal,
      onStep: options.onStep,
      user: userPolicy && userDrivers(scenario, task, `${episodeId}/user`, userPolicy, config, options),
      act: (input, signal) =>
        policy.act({
          episodeId,
          task,
          tools: openAITools(scenario),
          messages: input.messages,
          tokens: input.tokens,
          turn: input.turn,
          seed: input.seed,
          maxTokens: input.maxTokens,
          signal,
        }),
      execute: (call, ctx) => runner.run(call, { task, rng: ctx.rng, state: ctx.state, signal: ctx.signal }),
    });
    return buildRecord({ ...options, userPolicy }, { episodeId, index, sample, config }, driven);
  } finally {
    policy.release?.(episodeId);
    options.userPolicy?.release?.(`${episodeId}/user`);
  }
}

const defaultUsers = new WeakMap<Scenario, Promise<Policy>>();

/** The scenario's own user (its `defaultPolicy`), made once per scenario. */
export function defaultUserPolicy(scenario: Scenario, seed: number): Promise<Policy> {
  let made = defaultUsers.get(scenario);
  if (!made) {
    const role = scenario.user!;
    const factory = role.policies[role.defaultPolicy];
    if (!factory)
      throw new Error(
        `scenario ${scenario.id}: its user's default policy "${role.defaultPolicy}" is not among its user policies`,
      );
    made = Promise.resolve(factory({ scenario, seed }));
    defaultUsers.set(scenario, made);
  }
  return made;
}

/** The user's live side: its policy acts on its own view, its tools run on the episode's world. */
function userDrivers(
  scenario: Scenario,
  task: Task,
  episodeId: string,
  policy: Policy,
  config: EpisodeConfig,
  options: RunEpisodeOptions,
): UserDrivers {
  const role = scenario.user!;
  const tools = role.tools.map(toOpenAITool);
  const runner = new ToolRunner(role.tools, {
    timeoutMs: config.toolTimeoutMs,
    maxOutputChars: config.maxToolOutputChars,
    onToolTime: options.metrics ? (ms) => (options.metrics!.toolMs += ms) : undefined,
  });
  return {
    act: (input, signal) =>
      policy.act({
        episodeId,
        task,
        tools,
        messages: input.messages,
        turn: input.turn,
        seed: input.seed,
        maxTokens: input.maxTokens,
        signal,
      }),
    execute: (call, ctx) => runner.run(call, { task, rng: ctx.rng, state: ctx.state, signal: ctx.signal }),
  };
}

const scenarioRefs = new WeakMap<Scenario, EpisodeRecord['scenario']>();

/**
 * How a record names its scenario; a folder's path only where there is one, so built-in records keep
 * their bytes. Made once per scenario, frozen, its keys in canonical order: shared by its records.
 */
export function scenarioRef(scenario: Scenario): EpisodeRecord['scenario'] {
  let ref = scenarioRefs.get(scenario);
  if (!ref) {
    const { id, version, source } = scenario;
    const options = scenario.options && inCanonicalOrderCopy({ ...scenario.options });
    ref = deepFreeze(source === undefined ? { id, options, version } : { id, options, source, version });
    scenarioRefs.set(scenario, ref);
  }
  return ref;
}

/** Assembles and seals a record from a driven episode. Shared by live runs and replay. */
export function buildRecord(
  options: Pick<RunEpisodeOptions, 'scenario' | 'task' | 'policy' | 'seed' | 'group' | 'runId'> & {
    userPolicy?: Pick<Policy, 'id' | 'version'>;
  },
  ids: { episodeId: string; index: number; sample: number; config: EpisodeConfig },
  driven: DrivenEpisode,
): EpisodeRecord {
  const processReward = driven.turns.reduce((sum, t) => sum + t.reward, 0);
  // Fields in canonical (sorted) order, so that sealing writes the record with JSON.stringify.
  return sealRecord({
    answer: driven.answer,
    config: ids.config,
    endReason: driven.endReason,
    episodeId: ids.episodeId,
    ...(driven.error === null ? {} : { error: driven.error }),
    group: options.group ?? options.task.id,
    index: ids.index,
    outcome: driven.outcome,
    policy: { id: options.policy.id, version: options.policy.version },
    processReward,
    prompt: driven.prompt,
    ...(driven.promptTokens ? { promptTokens: driven.promptTokens } : {}),
    ...(driven.userPrompt && options.userPolicy
      ? {
          roles: {
            user: {
              policy: { id: options.userPolicy.id, version: options.userPolicy.version },
              prompt: driven.userPrompt,
            },
          },
        }
      : {}),
    runId: options.runId ?? 'adhoc',
    sample: ids.sample,
    scenario: scenarioRef(options.scenario),
    schema: RECORD_SCHEMA_VERSION,
    seed: options.seed,
    status: driven.error === null ? 'ok' : 'error',
    task: options.task,
    totalReward: processReward + driven.outcome.reward,
    totalTokens: driven.totalTokens,
    turns: driven.turns,
  });
}
