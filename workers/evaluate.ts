import { initBackend } from '../src/policy/tfjs/backend.ts';
import type { EvaluateTask, EvaluateTaskResult } from '../src/rl/eval-worker.ts';
import { evaluateMethod } from '../src/rl/paper.ts';
import { GptTrainable } from '../src/rl/tfjs-trainable.ts';
import { scenarioFor } from './scenario-cache.ts';

/**
 * A Piscina task: greedy evaluation of a saved checkpoint on one split, on this worker's own tfjs
 * backend (a second core, while the main thread trains). Same code and weights as an in-process
 * evaluation, so the same score. A task without a job only loads the backend and the scenario.
 */
export default async function evaluate(task: EvaluateTask): Promise<EvaluateTaskResult> {
  const t0 = performance.now();
  await initBackend(task.backend);
  const scenario = await scenarioFor(task.scenario);
  const job = task.job;
  if (!job) return { seconds: (performance.now() - t0) / 1000 };
  const model = await GptTrainable.fromCheckpoint(job.checkpoint, { id: job.policyId ?? job.method });
  try {
    const score = await evaluateMethod(scenario, job.method, model.policy({ temperature: 0 }), job.split, job.episodes, job.seed, job.episode);
    return { score, seconds: (performance.now() - t0) / 1000 };
  } finally {
    model.model.dispose();
  }
}
