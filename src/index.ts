// The public API of agent-r1-ts. Each area adds its exports here (small additive edits).

// RL: advantages, losses, KL, trajectories
export { computeAdvantages, ADVANTAGE_ESTIMATORS } from './rl/advantages.ts';
export type { AdvantageEstimator, AdvantageSequence, AdvantageOptions, AdvantageResult } from './rl/advantages.ts';
export { ppoPolicyLoss, clippedValueLoss, aggregateLoss, clipByGlobalNorm, LOSS_AGGREGATIONS } from './rl/losses.ts';
export type { LossAggregation, PolicyLossOptions } from './rl/losses.ts';
export { klToken, klTensor, applyKlPenalty, KL_ESTIMATORS } from './rl/kl.ts';
export type { KlEstimator } from './rl/kl.ts';
export { buildTrajectory, buildTrajectories } from './rl/trajectory.ts';
export type { TrainingSequence } from './rl/trajectory.ts';
export { RlInputError, TrainingError } from './rl/errors.ts';
// RL: the training loop
export { train, batchTasks } from './rl/trainer.ts';
export type { TrainOptions, TrainResult, StepMetrics, EvalMetrics } from './rl/trainer.ts';
export { resolveConfig, defaultConfig, ALGORITHMS } from './rl/config.ts';
export type { TrainConfig, Algorithm } from './rl/config.ts';
export { updateOnBatch } from './rl/update.ts';
export type { TrainablePolicy, ScoreOutput, ScoreRequest } from './rl/trainable.ts';
export { GptTrainable } from './rl/tfjs-trainable.ts';
export { sftWarmStart } from './rl/warm-start.ts';
export { runPaper, formatPaperTable } from './rl/paper.ts';
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
