// The public API of agent-r1-ts. Each area adds its exports here (small additive edits).

// Core: the vocabulary, seeded randomness, errors
export type {
  Json, Task, Role, Message, ToolCall, ParsedAction, ToolResult, ToolErrorKind, StepResult, Outcome, EndReason,
  PolicyOutput, TurnRecord, EpisodeConfig, EpisodeRecord,
} from './core/types.ts';
export { DEFAULT_EPISODE_CONFIG, RECORD_SCHEMA_VERSION } from './core/types.ts';
export { createRng, deriveSeed, type Rng } from './core/rng.ts';
export { canonicalJson } from './core/canonical-json.ts';
export {
  AgentR1Error, UnknownNameError, CorruptRecordError, ScenarioError, ScenarioOptionsError, UsageError,
} from './core/errors.ts';

// Tools and the ToolEnv: the Tool says what happened, the ToolEnv what it means
export { tool, toOpenAITool, type Tool, type ToolContext, type OpenAITool } from './tools/tool.ts';
export { ToolRunner, createToolCache, type ToolRunnerOptions } from './tools/runner.ts';
export type { ToolEnv, StepInput, OutcomeInput } from './env/tool-env.ts';
export { formatResults, formatInvalidAction, toolsSystemPrompt } from './env/observation.ts';
export { parseAction } from './parse/parse-action.ts';

// Scenarios and policies
export { defineScenario, type Scenario, type ScenarioDefinition, type TaskQuery, type PolicyFactory } from './scenario/scenario.ts';
export { loadScenario, instantiateScenario, type ScenarioRegistry } from './scenario/load.ts';
export type { Policy, BatchPolicy, PolicyRequest, PolicyEncoding } from './policy/policy.ts';
export { resolvePolicy } from './policy/resolve.ts';
export { recordTokens, buildTrajectory, buildTrajectories, fitToContext, TrajectoryError } from './policy/trajectory.ts';
export type { TokenSequence, TrainingSequence, RecordTokensOptions } from './policy/trajectory.ts';

// Episodes, rollouts, records and replay
export { episodeMachine, type EpisodeActors, type EpisodeInput, type EpisodeOutput } from '../machines/episode.ts';
export { runEpisode, episodeSeed, episodeConfig, type RunEpisodeOptions } from './rollout/run-episode.ts';
export { driveEpisode, samplerSeed, worldSeed, type EpisodeDrivers } from './rollout/drive-episode.ts';
export { rollout, type RolloutOptions, type RolloutResult, type ThroughputSummary } from './rollout/rollout.ts';
export { planEpisodes, runIdOf, type PlanOptions, type EpisodePlanItem } from './rollout/plan.ts';
export type { RolloutExecutor, EpisodeBatch, ExecutorReport } from './rollout/executor.ts';
export { inThread, type InThreadOptions } from './rollout/in-thread.ts';
export { workerThreads, WorkerThreads, canRunInWorkers, type WorkerThreadsOptions } from './rollout/worker-threads.ts';
export { Replica, canUseReplica, type ReplicaOptions } from './rollout/replica.ts';
export { BatchQueue, type BatchQueueOptions, type BatchQueueStats } from './rollout/batch-queue.ts';
export { playEpisodes, type EpisodeContext } from './rollout/play-episodes.ts';
export { RemotePolicy, PolicyServerError } from './rollout/remote-policy.ts';
export { summarizeRecords, type RolloutSummary } from './rollout/summary.ts';
export { sealRecord, serializeRecord, parseRecordLine, recordChecksum, episodeRecordSchema } from './replay/record.ts';
export { readRecords, loadRecords, RecordWriter, type RecordLine } from './replay/jsonl.ts';
export { replayRecord, firstDivergence, type Divergence, type ReplayResult, type ReplayOptions } from './replay/replay.ts';

// RL: advantages, losses, KL, trajectories
export { computeAdvantages, ADVANTAGE_ESTIMATORS } from './rl/advantages.ts';
export type { AdvantageEstimator, AdvantageSequence, AdvantageOptions, AdvantageResult } from './rl/advantages.ts';
export { ppoPolicyLoss, clippedValueLoss, aggregateLoss, LOSS_AGGREGATIONS } from './rl/losses.ts';
export type { LossAggregation, PolicyLossOptions } from './rl/losses.ts';
export { klToken, klTensor, applyKlPenalty, KL_ESTIMATORS } from './rl/kl.ts';
export type { KlEstimator } from './rl/kl.ts';
export { RlInputError, TrainingError } from './rl/errors.ts';
// RL: the training loop
export { train, batchTasks } from './rl/trainer.ts';
export type { TrainOptions, TrainResult, StepMetrics, EvalMetrics } from './rl/trainer.ts';
export type { BestCheckpoint } from './rl/best-checkpoint.ts';
export { resolveConfig, defaultConfig, ALGORITHMS } from './rl/config.ts';
export type { TrainConfig, Algorithm } from './rl/config.ts';
export { updateOnBatch } from './rl/update/update.ts';
export type { UpdateMetrics } from './rl/update/metrics.ts';
export type { TrainablePolicy, ScoreOutput, ScoreRequest, RolloutSampling } from './rl/trainable.ts';
export { GptTrainable } from './rl/tfjs-trainable.ts';
export { sftWarmStart } from './rl/warm-start.ts';
export { runPaper, formatPaperTable, evaluateMethod, evaluateModel, evalEpisodeCount, scoreRecords } from './rl/paper.ts';
export type { EvalEpisodes, MethodScore, PaperOptions, PaperResult } from './rl/paper.ts';
export { learningCurvesSvg } from './rl/learning-curves.ts';

// QA metrics (HotpotQA's official normalization, EM and F1)
export { normalizeAnswer, exactMatch, f1Score, f1Detail, qaScores } from './env/qa-metrics.ts';
export type { F1Detail } from './env/qa-metrics.ts';

// Scenarios: checks, diagrams of machines, the effects log for exact replay
export { checkScenario, checkScenarioDir, checkScenarioModule, checkTools } from './scenario/check.ts';
export type { ScenarioProblem, ProblemKind, CheckOptions, CheckResult } from './scenario/check.ts';
export { machineToMermaid, replaceDiagramBlocks } from './scenario/diagram.ts';
export { commitEffect, syncEffects, effectsOf, withoutEffects } from './scenario/effects.ts';
export type { Effect, EffectLog } from './scenario/effects.ts';

// OpenAI interop: serve a token policy behind an OpenAI-compatible API, use any OpenAI-compatible
// endpoint as a policy, convert episodes to OpenAI chat messages; export runs as training data
export { ChatServer, DEFAULT_MAX_BODY_BYTES } from './openai/server.ts';
export type { ChatServerOptions, RequestLogEntry } from './openai/server.ts';
export { ServingPolicy } from './openai/serving-policy.ts';
export type { ServablePolicy } from './openai/serving-policy.ts';
export { ChatBridge } from './openai/chat-bridge.ts';
export { OpenAIPolicy, openAIPolicyFromSpec, openAIOptionsFromSpec, readCompletion } from './openai/external-policy.ts';
export type { OpenAIPolicyOptions } from './openai/external-policy.ts';
export { actionToAssistant, assistantToAction, historyToOpenAI, observationToToolMessages, joinToolResults } from './openai/messages.ts';
export { chatCompletionRequestSchema } from './openai/wire.ts';
export type { OpenAIMessage, OpenAIToolCall, AssistantMessage, ChatCompletion } from './openai/wire.ts';
export { OpenAIHttpError, ExternalPolicyError, PolicySpecError } from './openai/errors.ts';
export { exportRun, readRun, recordsToRows, ExportError, EXPORT_FORMATS } from './export/export-run.ts';
export type { ExportFormat, ExportOptions, ExportResult } from './export/export-run.ts';
export { recordToRow, recordMessages } from './export/episode-row.ts';
export type { EpisodeRow, ExportMessage } from './export/episode-row.ts';
export { rowsToParquet } from './export/parquet.ts';

// Viewer and report
export { startViewer, ViewerApp } from './view/server.ts';
export type { Viewer, ViewerOptions } from './view/server.ts';
export { buildReport } from './view/report.ts';
export type { ReportOptions } from './view/report.ts';
export { EpisodeIndex } from './view/episode-index.ts';
export type { EpisodeSummary, EpisodeFilter } from './view/episode-index.ts';
export { machineGraph } from './view/machine-graph.ts';
export type { MachineGraph } from './view/machine-graph.ts';
export { renderDiagram } from './view/diagram-svg.ts';
export { readRunDir, parseMetrics } from './view/run-dir.ts';
export type { RunInfo, MetricRow } from './view/run-dir.ts';
export { RunDirError, ViewRequestError } from './view/errors.ts';

// The tfjs policy: backend selection, tokenizer, GPT, generation, scoring, checkpoints, SFT
export {
  initBackend, backendInfo, GPTModel, DEFAULT_MODEL_CONFIG, parseModelConfig, scoreSequences, scoreTokens, maskedIndices, padBatch,
  AdamW, scheduleLr, clipByGlobalNorm, OptimizerError, maskedNll, saveCheckpoint, loadCheckpoint, loadCheckpointPolicy, modelHash, CheckpointError, Tokenizer,
  trainTokenizer, SPECIAL_TOKENS, chatEncoding, generate, sampleToken, TfjsPolicy, KVCache,
  type ModelConfig, type SamplingOptions, type TokenizerJSON, type Checkpoint, type AdamWOptions, type StepStats,
} from './policy/tfjs/index.ts';
export { trainSft, runSft, sequencesFromRecords, recordTexts, SftError, type SftOptions, type RunSftOptions } from './policy/tfjs/sft.ts';
