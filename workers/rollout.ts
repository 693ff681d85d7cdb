import type { EpisodeRecord } from '../src/core/types.ts';
import { AgentR1Error } from '../src/core/errors.ts';
import type { Policy } from '../src/policy/policy.ts';
import { BatchQueue } from '../src/rollout/batch-queue.ts';
import { playEpisodes } from '../src/rollout/play-episodes.ts';
import type {
  RolloutTask,
  RolloutTaskResult,
  ServerMessage,
  WorkerMessage,
  WorkerPolicySpec,
} from '../src/rollout/protocol.ts';
import { serializeRecord } from '../src/record/record.ts';
import { type MessagePort, threadId } from 'node:worker_threads';
import { RemotePolicy } from '../src/rollout/remote-policy.ts';
import type { Scenario } from '../src/scenario/scenario.ts';
import { referencePolicy } from '../src/scenario/reference-policy.ts';
import { toolCacheOf } from '../src/tools/runner.ts';
import { scenarioFor } from './scenario-cache.ts';

/** The model a copy spec names, loaded once per weights (the last one is kept for the next task). */
let copy: { weights: string; load: Promise<import('../src/policy/tfjs/checkpoint.ts').Checkpoint> } | undefined;

async function loadCopy(spec: Extract<WorkerPolicySpec, { kind: 'copy' }>): Promise<Policy> {
  const { initBackend } = await import('../src/policy/tfjs/backend.ts');
  const { loadCheckpoint } = await import('../src/policy/tfjs/checkpoint.ts');
  const { TfjsPolicy } = await import('../src/policy/tfjs/tfjs-policy.ts');
  await initBackend(spec.backend);
  if (copy?.weights !== spec.weights) {
    const old = copy;
    copy = { weights: spec.weights, load: loadCheckpoint(spec.checkpoint) };
    old?.load.then(
      (c) => c.model.dispose(),
      () => {},
    );
  }
  const ckpt = await copy.load;
  if (ckpt.hash !== spec.weights) {
    throw new AgentR1Error(
      `checkpoint ${spec.checkpoint} holds weights ${ckpt.hash.slice(0, 12)}, not the ${spec.weights.slice(0, 12)} asked for`,
    );
  }
  const inner = new TfjsPolicy({
    id: spec.id,
    version: spec.version,
    model: ckpt.model,
    tokenizer: ckpt.tokenizer,
    sampling: spec.sampling as object,
  });
  return new BatchQueue(inner, { maxBatch: spec.maxBatch, maxWaitMs: 0 }).direct();
}

async function policyFor(spec: WorkerPolicySpec, scenario: Scenario, task: RolloutTask): Promise<Policy> {
  if (spec.kind === 'scripted') return referencePolicy(scenario, spec.name, spec.seed);
  if (spec.kind === 'copy') return loadCopy(spec);
  const { Tokenizer } = await import('../src/policy/tfjs/tokenizer.ts');
  const { chatEncoding } = await import('../src/policy/tfjs/chat-template.ts');
  const remote = new RemotePolicy(
    task.port,
    spec.id,
    spec.version,
    chatEncoding(new Tokenizer(spec.tokenizer as never)),
  );
  task.port.on('message', (m: ServerMessage) => remote.receive(m));
  return remote;
}

/**
 * A Piscina task: play a share of a run's episodes with the one episode loop (playEpisodes).
 * Finished episodes go back over the task's port within milliseconds, so a crash loses only the
 * unfinished ones; a served policy answers over the same port.
 */
export default async function runRolloutTask(task: RolloutTask): Promise<RolloutTaskResult> {
  const metrics = { toolMs: 0 };
  const sender = new RecordSender(task.port);
  let heartbeat: NodeJS.Timeout | undefined;
  try {
    const scenario = await scenarioFor(task.scenario);
    const policy = await policyFor(task.policy, scenario, task);
    // Ready: from now on the main thread hears this thread's event loop turn, or terminates it.
    if (task.heartbeatMs) {
      const alive: WorkerMessage = { type: 'alive', thread: threadId };
      task.port.postMessage(alive);
      heartbeat = setInterval(() => task.port.postMessage(alive), task.heartbeatMs);
    }
    const started = task.started;
    const context = {
      scenario,
      policy,
      runId: task.runId,
      config: task.config,
      toolCache: toolCacheOf(scenario),
      metrics,
      ...(started ? { onStart: (position: number) => Atomics.store(started, position, 1) } : {}),
    };
    await playEpisodes(task.items, task.concurrency, context, (record: EpisodeRecord) => sender.send(record));
  } finally {
    clearInterval(heartbeat);
    sender.flush();
    task.port.close();
  }
  return { episodes: task.items.length, toolMs: metrics.toolMs };
}

/**
 * Sends finished records to the main thread as their JSONL lines, a few at a time: a line is cheap
 * to post and the main thread writes it as it is; one message per short episode would cost the main
 * thread more than the episode cost here.
 */
class RecordSender {
  private lines: string[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly port: MessagePort) {}

  send(record: EpisodeRecord): void {
    this.lines.push(serializeRecord(record));
    if (this.lines.length >= 64) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), 5);
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.lines.length === 0) return;
    const message: WorkerMessage = { type: 'records', lines: this.lines };
    this.port.postMessage(message);
    this.lines = [];
  }
}
