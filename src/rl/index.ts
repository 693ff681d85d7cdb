// agent-r1-ts/rl: training. Trajectories, advantages, losses, KL, the trainer and its config, model
// replicas, the paper pipeline; the policy server that batches worker requests for a model.

// RL: advantages, losses, KL, trajectories
export { computeAdvantages, ADVANTAGE_ESTIMATORS } from './advantages.ts';
export type { AdvantageEstimator, AdvantageSequence, AdvantageOptions, AdvantageResult } from './advantages.ts';
export { ppoPolicyLoss, clippedValueLoss, aggregateLoss, clipByGlobalNorm, LOSS_AGGREGATIONS } from './losses.ts';
export type { LossAggregation, PolicyLossOptions } from './losses.ts';
export { klToken, klTensor, applyKlPenalty, KL_ESTIMATORS } from './kl.ts';
export type { KlEstimator } from './kl.ts';
export { buildTrajectory, buildTrajectories } from './trajectory.ts';
export type { TrainingSequence } from './trajectory.ts';
export { RlInputError, TrainingError } from './errors.ts';
// RL: the training loop
export { train, batchTasks } from './trainer.ts';
export type { TrainOptions, TrainResult, StepMetrics, EvalMetrics, BestCheckpoint } from './trainer.ts';
export { resolveConfig, defaultConfig, ALGORITHMS } from './config.ts';
export type { TrainConfig, Algorithm } from './config.ts';
export { updateOnBatch } from './update.ts';
export type { TrainablePolicy, ScoreOutput, ScoreRequest } from './trainable.ts';
export { GptTrainable } from './tfjs-trainable.ts';
export { sftWarmStart } from './warm-start.ts';
export { rolloutInThread, type ModelRollout } from './model-rollout.ts';
export { ReplicaRollouts, canUseReplica } from './replica.ts';
export { runPaper, formatPaperTable, evaluateMethod, evaluateModel, evalEpisodeCount, scoreRecords } from './paper.ts';
export type { EvalEpisodes, MethodScore, PaperOptions, PaperResult } from './paper.ts';
export { learningCurvesSvg } from './learning-curves.ts';

// Rollout internals a trainer uses: the policy server, token-level trajectories
export { PolicyServer, type PolicyServerOptions, type PolicyServerStats } from '../rollout/policy-server.ts';
export { RemotePolicy, PolicyServerError } from '../rollout/remote-policy.ts';
export { toTrajectory } from '../rollout/trajectory.ts';
export type { Trajectory } from '../rollout/protocol.ts';
