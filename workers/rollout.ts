import { LRUCache } from 'lru-cache';
import { canonicalJson } from '../src/core/canonical-json.ts';
import type { EpisodeRecord, Task } from '../src/core/types.ts';
import { AgentR1Error } from '../src/core/errors.ts';
import { encodingFromSpec } from '../src/policy/encoding-spec.ts';
import type { EncodingSpec, Policy, PolicyEncoding } from '../src/policy/policy.ts';
import { BatchQueue } from '../src/rollout/batch-queue.ts';
import { playEpisodes } from '../src/rollout/play-episodes.ts';
import type {
  DrawMismatch,
  RolloutTask,
  RolloutTaskResult,
  ServerMessage,
  WorkerMessage,
  WorkerPolicySpec,
} from '../src/rollout/protocol.ts';
import { serializeRecord } from '../src/record/record.ts';
import type { EpisodeDigest } from '../src/rollout/finished-episode.ts';
import { type RolloutSummarizer, rolloutSummarizer } from '../src/rollout/summary.ts';
import { type MessagePort, threadId } from 'node:worker_threads';
import type { EpisodePlanItem } from '../src/rollout/plan.ts';
import { RemotePolicy } from '../src/rollout/remote-policy.ts';
import type { Scenario } from '../src/scenario/scenario.ts';
import { referencePolicy } from '../src/scenario/reference-policy.ts';
import { toolCacheOf } from '../src/tools/runner.ts';
import { scenarioFor } from './scenario-cache.ts';

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

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
  const remote = new RemotePolicy(task.port, spec.id, spec.version, await encodingFor(spec.encoding));
  task.port.on('message', (m: ServerMessage) => remote.receive(m));
  return remote;
}

/** Encodings this thread built lately, by spec (a Hugging Face tokenizer takes a second to build). */
const encodings = new LRUCache<string, Promise<PolicyEncoding>>({ max: 4 });

function encodingFor(spec: EncodingSpec): Promise<PolicyEncoding> {
  const key = canonicalJson(spec);
  let encoding = encodings.get(key);
  if (!encoding) {
    encoding = encodingFromSpec(spec);
    encodings.set(key, encoding);
    encoding.catch(() => encodings.delete(key));
  }
  return encoding;
}

/** The task lists this thread drew lately, by scenario and draw: a run's chunks share one draw. */
const draws = new LRUCache<string, Promise<Task[]>>({ max: 4 });

/**
 * The task's plan items, with their tasks: sent, or drawn here and checked against their ids (the
 * first that differs is returned instead: the main thread fails the run with it).
 */
async function planItems(
  task: RolloutTask,
  scenario: Scenario,
): Promise<{ items: EpisodePlanItem[] } | { mismatch: DrawMismatch }> {
  const { episodes } = task;
  if (!('drawn' in episodes)) return { items: episodes.items };
  const key = canonicalJson({ scenario: task.scenario, draw: episodes.drawn });
  let tasks = draws.get(key);
  if (!tasks) {
    tasks = Promise.resolve(scenario.tasks(episodes.drawn));
    draws.set(key, tasks);
  }
  const drawn = await tasks;
  const items: EpisodePlanItem[] = [];
  for (const { taskId, ...item } of episodes.items) {
    const found = drawn[item.slot];
    if (found?.id !== taskId) return { mismatch: { index: item.index, got: found?.id ?? null } };
    items.push({ ...item, task: found });
  }
  return { items };
}

/**
 * A Piscina task: play a share of a run's episodes with the one episode loop (playEpisodes).
 * Finished episodes go back over the task's port within milliseconds, so a crash loses only the
 * unfinished ones; a served policy answers over the same port.
 */
export default async function runRolloutTask(task: RolloutTask): Promise<RolloutTaskResult> {
  const metrics = { toolMs: 0 };
  let sender: RecordSender | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  try {
    const scenario = await scenarioFor(task.scenario);
    sender = new RecordSender(task.port, rolloutSummarizer(scenario));
    const policy = await policyFor(task.policy, scenario, task);
    // Ready: from now on the main thread hears this thread's event loop turn, or terminates it.
    if (task.heartbeatMs) {
      const alive: WorkerMessage = { type: 'alive', thread: threadId };
      task.port.postMessage(alive);
      heartbeat = setInterval(() => task.port.postMessage(alive), task.heartbeatMs);
    }
    const planned = await planItems(task, scenario);
    if ('mismatch' in planned) return { episodes: 0, toolMs: 0, drawMismatch: planned.mismatch };
    const { items } = planned;
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
    const records = sender;
    await playEpisodes(items, task.concurrency, context, (record: EpisodeRecord) => records.send(record));
  } finally {
    clearInterval(heartbeat);
    sender?.flush();
    task.port.close();
  }
  return { episodes: task.episodes.items.length, toolMs: metrics.toolMs };
}

const encoder = new TextEncoder();

/**
 * Sends finished records to the main thread, a few at a time: their sealed lines as UTF-8 bytes in
 * one transferred buffer, and each record's digest (what the run's summary and progress need), so
 * the main thread writes the bytes as they are and never parses a line. A message goes when 64
 * records wait, or 20 ms after the first: each wakes the main thread, and one per short episode
 * would cost it more than the episode cost here (a crash loses nothing waiting: its episodes are
 * played again).
 */
class RecordSender {
  /** The waiting lines' bytes (reused: each message gets a copy of exactly its lines). */
  private bytes = new Uint8Array(64 * 1024);
  private used = 0;
  private ends: number[] = [];
  private digests: EpisodeDigest[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly port: MessagePort,
    private readonly summary: RolloutSummarizer,
  ) {}

  send(record: EpisodeRecord): void {
    const line = serializeRecord(record);
    // UTF-8 takes at most 3 bytes for each UTF-16 unit.
    if (this.used + 3 * line.length > this.bytes.length) {
      const grown = new Uint8Array(Math.max(2 * this.bytes.length, this.used + 3 * line.length));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    this.used += encoder.encodeInto(line, this.bytes.subarray(this.used)).written;
    this.ends.push(this.used);
    this.digests.push(this.summary.digest(record));
    if (this.ends.length >= 64) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), 20);
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.ends.length === 0) return;
    const bytes = this.bytes.slice(0, this.used);
    const message: WorkerMessage = { type: 'records', bytes, ends: this.ends, digests: this.digests };
    try {
      this.port.postMessage(message, [bytes.buffer]);
    } catch (err) {
      // A scenario summarizer's digest that cannot cross threads: said in its place, for the main
      // thread to raise as the summarizer's error (the records themselves are plain JSON).
      for (const digest of this.digests) {
        try {
          structuredClone(digest.own);
        } catch (cloneError) {
          delete digest.own;
          digest.ownError = `its digest cannot be sent to another thread (${errorText(cloneError)})`;
        }
      }
      if (this.digests.every((d) => d.ownError === undefined)) throw err;
      this.port.postMessage(message, [bytes.buffer]);
    }
    this.used = 0;
    this.ends = [];
    this.digests = [];
  }
}
