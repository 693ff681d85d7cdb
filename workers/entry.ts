// The entry every Piscina worker thread loads: compiled, dist/workers/entry.js, with no loader; from
// the sources, workers/bootstrap.mjs registers tsx first and delegates here. Piscina picks the task
// by export name (its `name` option): the default plays a share of a run's episodes
// (workers/rollout.ts); `train` computes a micro-batch's gradient on a model replica (workers/train.ts);
// `check` runs `scenario check` on a folder under a watchdog (workers/check.ts).
// Each loads its module on first use, so a thread loads only what its tasks need.
import type { RolloutTask, RolloutTaskResult } from '../src/rollout/protocol.ts';
import type { TrainTask, TrainTaskResult } from '../src/rl/train-threads.ts';
import type { CheckFindings, CheckTask } from '../src/app/check-in-thread.ts';

export default async function rollout(task: RolloutTask): Promise<RolloutTaskResult> {
  return (await import('./rollout.ts')).default(task);
}

export async function train(task: TrainTask): Promise<TrainTaskResult> {
  return (await import('./train.ts')).default(task);
}

export async function check(task: CheckTask): Promise<CheckFindings> {
  return (await import('./check.ts')).default(task);
}
