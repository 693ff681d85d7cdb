// agent-r1-ts/queue: rollouts across machines. A QueueExecutor plays rollout()'s and train()'s
// episodes on QueueWorkers (`agent-r1 worker`) through BullMQ on Redis, with the same records.
export { QueueExecutor, canRunOnQueue } from './queue-executor.ts';
export type { QueueExecutorOptions, QueueStats, QueueEvent, DeterminismFault } from './queue-executor.ts';
export { QueueWorker } from './queue-worker.ts';
export type { QueueWorkerOptions, WorkerStatus } from './queue-worker.ts';
export { QueueUnavailableError, QueueRunError, QueueUrlError } from './errors.ts';
export { MissingCheckpointError } from './checkpoint-store.ts';
