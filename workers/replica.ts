import { AgentR1Error } from '../src/core/errors.ts';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import type { ReplicaTask, ReplicaTaskResult } from '../src/rl/replica.ts';
import { GptTrainable } from '../src/rl/tfjs-trainable.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { scenarioFor } from './scenario-cache.ts';

/**
 * A Piscina task: play a share of a rollout with a copy of the model, loaded from the checkpoint
 * the main thread saved of its current weights, on this worker's own tfjs backend (see
 * ReplicaRollouts). A task without a job only loads the backend and builds the scenario.
 */
export default async function replicaRollout(task: ReplicaTask): Promise<ReplicaTaskResult> {
  const t0 = performance.now();
  await initBackend(task.backend);
  const scenario = await scenarioFor(task.scenario);
  const job = task.job;
  if (!job) return { records: [], seconds: (performance.now() - t0) / 1000 };
  const model = await GptTrainable.fromCheckpoint(job.checkpoint, { id: job.policyId });
  try {
    if (model.version() !== job.version) {
      throw new AgentR1Error(`checkpoint ${job.checkpoint} holds weights ${model.version().slice(0, 12)}, not the ${job.version.slice(0, 12)} asked for`);
    }
    const { records } = await rollout({ ...job.rollout, scenario, policy: model.policy(job.sampling) });
    return { records, seconds: (performance.now() - t0) / 1000 };
  } finally {
    model.model.dispose();
  }
}
