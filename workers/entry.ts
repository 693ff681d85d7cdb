// The entry every Piscina worker thread loads (compiled: dist/workers/entry.js; from the sources,
// workers/bootstrap.mjs registers tsx first and delegates here). Each task kind is a named export
// (Piscina's `name` option), imported on first use: a rollout worker never loads tfjs, a replica
// worker loads it for its copy of the model.
import type { ReplicaTask, ReplicaTaskResult } from '../src/rl/replica.ts';
import type { RolloutTask, RolloutTaskResult } from '../src/rollout/protocol.ts';

export default async function rollout(task: RolloutTask): Promise<RolloutTaskResult> {
  return (await import('./rollout.ts')).default(task);
}

export async function replica(task: ReplicaTask): Promise<ReplicaTaskResult> {
  return (await import('./replica.ts')).default(task);
}
