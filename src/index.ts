// The public API of agent-r1-ts: what a user needs to write a scenario (tools, a ToolEnv, tasks,
// reference policies, a world machine) and to run, evaluate, record and replay its episodes. It
// loads no model library: scenarios import it in every worker thread. The rest is on subpaths:
//   agent-r1-ts/tfjs    the tfjs policy: backend, tokenizer, GPT, generation, checkpoints, SFT
//   agent-r1-ts/rl      training: trajectories, advantages, losses, the trainer, the warm start
//   agent-r1-ts/openai  OpenAI interop (serve a policy, call an endpoint, messages) and run export
//   agent-r1-ts/view    the episode viewer and the HTML report

// Core: the vocabulary, seeded randomness, errors
export type {
  Json,
  Task,
  Role,
  Message,
  ToolCall,
  ParsedAction,
  ToolResult,
  ToolErrorKind,
  StepResult,
  Outcome,
  EndReason,
  PolicyOutput,
  TurnRecord,
  EpisodeConfig,
  EpisodeRecord,
  RecordPolicy,
  ReplyRecord,
  ReplyStep,
  RoleName,
} from './core/types.ts';
export { DEFAULT_EPISODE_CONFIG, RECORD_SCHEMA_VERSION } from './core/types.ts';
export { createRng, deriveSeed, type Rng } from './core/rng.ts';
export { canonicalJson } from './core/canonical-json.ts';
export { deepFreeze } from './core/deep-freeze.ts';
export {
  AgentR1Error,
  UnknownNameError,
  CorruptRecordError,
  MalformedAnswerError,
  ScenarioError,
  SummarizerError,
  TaskDrawMismatchError,
  ScenarioOptionsError,
  UsageError,
} from './core/errors.ts';
export { importOptional, MissingOptionalDependencyError } from './core/optional-import.ts';

// Tools and the ToolEnv: the Tool says what happened, the ToolEnv what it means
export { tool, toOpenAITool, ToolOutput, type Tool, type ToolContext, type OpenAITool } from './tools/tool.ts';
export { ToolRunner, createToolCache, type ToolRunnerOptions } from './tools/runner.ts';
export type { ToolEnv, InitContext, StepInput, OutcomeInput } from './env/tool-env.ts';
export { formatResults, formatInvalidAction, toolsSystemPrompt } from './env/observation.ts';
export { parseAction } from './parse/parse-action.ts';

// Scenarios and policies
export {
  defineScenario,
  type Scenario,
  type ScenarioDefinition,
  type Summarizer,
  type TaskQuery,
  type PolicyFactory,
  type UserRole,
} from './scenario/scenario.ts';
export { END_CONVERSATION } from './scenario/end-conversation.ts';
export {
  loadScenario,
  loadScenarioFolder,
  loadRecordScenario,
  instantiateScenario,
  type ScenarioRegistry,
} from './scenario/load.ts';
export { UnknownScenarioError, ScenarioFolderMissingError } from './scenario/errors.ts';
export type { Policy, BatchPolicy, PolicyRequest, PolicyEncoding } from './policy/policy.ts';
export { resolvePolicy } from './app/resolve-policy.ts';
export { referencePolicy, type ReferencePolicySpec } from './scenario/reference-policy.ts';

// Episodes, rollouts, records and replay
export {
  episodeMachine,
  runEpisodeMachine,
  type EpisodeActors,
  type EpisodeEvent,
  type EpisodeInput,
  type EpisodeOutput,
} from '../machines/episode.ts';
export { runEpisode, episodeSeed, episodeConfig, type RunEpisodeOptions } from './episode/run-episode.ts';
export { driveEpisode, samplerSeed, worldSeed, type EpisodeDrivers } from './episode/drive-episode.ts';
export { rollout, type RolloutOptions, type RolloutResult, type ThroughputSummary } from './rollout/rollout.ts';
export { planEpisodes, runIdOf, type PlanOptions, type EpisodePlanItem } from './rollout/plan.ts';
export type { RolloutExecutor, EpisodeBatch, ExecutorReport } from './rollout/executor.ts';
export { FinishedEpisode, lineOf, type EpisodeDigest, type Finished } from './rollout/finished-episode.ts';
export { inThread, type InThreadOptions } from './rollout/in-thread.ts';
export { workerThreads, WorkerThreads, canRunInWorkers, type WorkerThreadsOptions } from './rollout/worker-threads.ts';
export { Replica, canUseReplica, type ReplicaOptions } from './rollout/replica.ts';
export { BatchQueue, type BatchQueueOptions, type BatchQueueStats } from './rollout/batch-queue.ts';
export { playEpisodes, type EpisodeContext } from './rollout/play-episodes.ts';
export {
  summarizeRecords,
  rolloutSummarizer,
  type RolloutSummary,
  type RolloutSummarizer,
} from './rollout/summary.ts';
export { sealRecord, serializeRecord, parseRecordLine, recordChecksum, episodeRecordSchema } from './record/record.ts';
export { readRecords, loadRecords, RecordWriter, type RecordLine } from './record/jsonl.ts';
export {
  replayRecord,
  firstDivergence,
  type Divergence,
  type ReplayResult,
  type ReplayOptions,
} from './replay/replay.ts';

// QA metrics (HotpotQA's official normalization, EM and F1)
export { normalizeAnswer, exactMatch, f1Score, f1Detail, qaScores } from './env/qa-metrics.ts';
export type { F1Detail } from './env/qa-metrics.ts';

// Scenarios: checks, diagrams of machines, the effects log for exact replay
export { checkScenario, checkScenarioDir, checkScenarioModule, checkTools } from './app/check-scenario.ts';
export type { ScenarioProblem, ProblemKind, CheckOptions, CheckResult } from './app/check-scenario.ts';
export { machineToMermaid, replaceDiagramBlocks } from './scenario/diagram.ts';
export { commitEffect, syncEffects, effectsOf, withoutEffects } from './scenario/effects.ts';
export type { Effect, EffectLog } from './scenario/effects.ts';
