// agent-r1-ts/rl: training. Trajectories, advantages, losses, KL, the trainer and its config, the
// SFT warm start. (The paper pipeline is the application's: src/app/paper.ts.)

// One record → token sequence conversion, for SFT and RL
export {
  recordTokens,
  buildTrajectory,
  buildTrajectories,
  fitToContext,
  TrajectoryError,
  TextOnlyRecordError,
} from '../policy/trajectory.ts';
export type { TokenSequence, TrainingSequence, RecordTokensOptions } from '../policy/trajectory.ts';
// RL: advantages, losses, KL, trajectories
export { computeAdvantages, ADVANTAGE_ESTIMATORS } from './advantages.ts';
export type { AdvantageEstimator, AdvantageSequence, AdvantageOptions, AdvantageResult } from './advantages.ts';
export { ppoPolicyLoss, clippedValueLoss, aggregateLoss, LOSS_AGGREGATIONS } from './losses.ts';
export type { LossAggregation, PolicyLossOptions } from './losses.ts';
export { klToken, klTensor, applyKlPenalty, KL_ESTIMATORS } from './kl.ts';
export type { KlEstimator } from './kl.ts';
export { RlInputError, TrainingError } from './errors.ts';
// RL: the training loop
export { train, batchTasks } from './trainer.ts';
export type { TrainOptions, TrainResult, StepMetrics, EvalMetrics } from './trainer.ts';
export type { BestCheckpoint } from './best-checkpoint.ts';
export { resolveConfig, defaultConfig, ALGORITHMS } from './config.ts';
export type { TrainConfig, Algorithm } from './config.ts';
export { updateOnBatch } from './update/update.ts';
export type { UpdateMetrics } from './update/metrics.ts';
export type { TrainablePolicy, ScoreOutput, ScoreRequest, RolloutSampling } from './trainable.ts';
export { GptTrainable } from './tfjs-trainable.ts';
// Data-parallel training: model replicas in worker threads compute micro-batch gradients
export { TrainThreads, trainReplicas, ReplicaError } from './train-threads.ts';
export type { TrainThreadsOptions } from './train-threads.ts';
export { sftWarmStart } from './warm-start.ts';
export { learningCurvesSvg } from './learning-curves.ts';

// Rollout internals a worker of one's own uses: the worker side of the batch queue's port front end
export { RemotePolicy, PolicyServerError } from '../rollout/remote-policy.ts';
