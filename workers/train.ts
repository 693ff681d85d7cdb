import type { GPTModel } from '../src/architectures/gpt/model.ts';
import type { SftMicroJob } from '../src/policy/tfjs/sft.ts';
import type { RlMicroJob } from '../src/rl/update/minibatch.ts';
import type { ReplicaModelSpec, TrainTask, TrainTaskResult } from '../src/rl/train-threads.ts';

/** This thread's replica: the last master model it was sent, at the last weights it was sent. */
let replica: { key: string; version: number; model: GPTModel } | undefined;

async function replicaFor(spec: ReplicaModelSpec): Promise<GPTModel> {
  const { GPTModel } = await import('../src/architectures/gpt/model.ts');
  const { writeWeights } = await import('../src/policy/tfjs/data-parallel.ts');
  if (replica?.key !== spec.key) {
    replica?.model.dispose();
    replica = undefined;
    replica = { key: spec.key, version: -1, model: new GPTModel(spec.config, 0) };
  }
  if (replica.version !== spec.version) {
    writeWeights(replica.model.trainableVariables, new Float32Array(spec.weights));
    replica.version = spec.version;
  }
  return replica.model;
}

/**
 * A Piscina task (export name `train`): one micro-batch's gradient on this thread's model replica,
 * written into the task's shared buffer, computed by the very functions the trainer runs in its own
 * thread (sftMicroGradient, rlMicroGradient), so the bits are the same. Errors come back as results:
 * a rejected task means the thread died, and the trainer gives the job to another replica.
 */
export default async function runTrainTask(task: TrainTask): Promise<TrainTaskResult> {
  let result: TrainTaskResult;
  try {
    const { initBackend } = await import('../src/policy/tfjs/backend.ts');
    await initBackend(task.backend);
    const model = await replicaFor(task.model);
    const out = new Float32Array(task.out);
    let present: readonly number[];
    let stats: { [key: string]: number };
    if (task.kind === 'sft') {
      const { sftMicroGradient } = await import('../src/policy/tfjs/sft.ts');
      ({ present, stats } = await sftMicroGradient(model, task.job as SftMicroJob, out));
    } else if (task.kind === 'rl') {
      const { rlMicroGradient } = await import('../src/rl/update/minibatch.ts');
      const { scoreGpt } = await import('../src/rl/tfjs-trainable.ts');
      const job = task.job as RlMicroJob;
      const scorer = { score: (req: Parameters<typeof scoreGpt>[2]) => scoreGpt(model, job.pad, req) };
      ({ present, stats } = await rlMicroGradient(scorer, model.trainableVariables, job, out));
    } else throw new Error(`unknown training job kind "${task.kind}"`);
    result = { ok: true, present: [...present], stats };
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    result = { ok: false, name: e.name, message: e.message };
  }
  if (task.exit) process.exit(1);
  return result;
}
