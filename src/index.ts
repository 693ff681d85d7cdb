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
