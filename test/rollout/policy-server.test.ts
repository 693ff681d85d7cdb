import type { Scenario } from '../../src/scenario/scenario.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import test from 'ava';
import calculator from '../../scenarios/calculator/index.ts';
import { GPTModel, initBackend, loadCheckpointPolicy, saveCheckpoint, trainTokenizer } from '../../src/policy/tfjs/index.ts';
import type { BatchPolicy } from '../../src/policy/policy.ts';
import { parallelRollout } from '../../src/rollout/parallel-rollout.ts';
import { PolicyServer } from '../../src/rollout/policy-server.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { serializeRecord } from '../../src/replay/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';

const calc = calculator as unknown as Scenario;
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
const config = { maxTurns: 2, maxTokensPerTurn: 20, maxTotalTokens: 400 };

/** A small untrained checkpoint: random weights, a tokenizer trained on calculator text. */
async function tinyPolicy(): Promise<BatchPolicy> {
  await initBackend();
  const texts = (await calc.tasks({ split: 'train', seed: 0, count: 50 })).flatMap((task) => [task.question, `<tool_call>{"name": "calculate", "arguments": {"expression": "${task.meta!.expression}"}}</tool_call>`]);
  const tokenizer = trainTokenizer(texts, { vocabSize: 400 });
  const model = new GPTModel({ vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 1, nHeads: 2, contextLength: 512, dMlp: 64 }, 5);
  const dir = join(mkdtempSync(join(tmpdir(), 'agent-r1-ckpt-')), 'ckpt');
  await saveCheckpoint(dir, model, tokenizer, { sampling: { temperature: 1 } });
  return loadCheckpointPolicy(dir);
}

test('checkpoint policy: byte-identical records in one thread and with 1, 2 and 4 workers and any max batch; they replay', async (t) => {
  const policy = await tinyPolicy();
  const options = { scenario: calc, policy, split: 'train', episodes: 12, seed: 4, group: 3, config };
  const single = await rollout({ ...options, concurrency: 1 });
  t.true(single.records.every((r) => r.turns.every((turn) => turn.tokens && turn.logprobs)));
  const expected = bytes(single.records);
  for (const [workers, maxBatch] of [
    [1, 1],
    [2, 8],
    [4, 3],
  ] as const) {
    const { records, trajectories } = await parallelRollout({ ...options, workers, maxBatch });
    t.is(bytes(records), expected, `${workers} workers, max batch ${maxBatch}`);
    t.true(trajectories.every((tr) => tr && tr.tokens instanceof Int32Array && tr.mask.some((m) => m === 1)));
  }
  for (const record of single.records) t.true((await replayRecord(record, calc)).verified);
});

test("the policy server merges two workers' requests into one batch", async (t) => {
  const policy = await tinyPolicy();
  const result = await parallelRollout({ scenario: calc, policy, split: 'train', episodes: 16, seed: 2, workers: 2, maxBatch: 8, perWorkerConcurrency: 4, maxWaitMs: 3000, config });
  const sizes = Object.keys(result.summary.policyServer!.batchSizes).map(Number);
  // Each worker has at most 4 episodes in flight: a batch above 4 holds rows from both.
  t.true(Math.max(...sizes) > 4, `batch sizes ${JSON.stringify(result.summary.policyServer!.batchSizes)}`);
  t.true(result.summary.throughput.share.policy > 0);
});

test('a malformed request gets an error on its own port only; other workers are served', async (t) => {
  const policy = await tinyPolicy();
  const server = new PolicyServer(policy, { maxBatch: 8, maxWaitMs: 1 });
  const bad = new MessageChannel();
  const good = new MessageChannel();
  server.attach(bad.port1);
  server.attach(good.port1);
  const reply = (port: MessageChannel['port2']) => new Promise<any>((resolve) => port.once('message', resolve));
  const badReply = reply(bad.port2);
  const goodReply = reply(good.port2);
  bad.port2.postMessage({ type: 'generate', id: 7, rows: [{ episodeId: 'x', tokens: [-1], seed: 1.5, maxTokens: 4, turn: 0 }] });
  good.port2.postMessage({ type: 'generate', id: 1, rows: [{ episodeId: 'y', tokens: [1, 2, 3], seed: 1, maxTokens: 4, turn: 0 }] });
  const b = await badReply;
  t.is(b.type, 'error');
  t.is(b.id, 7);
  t.regex(b.message, /malformed policy request/);
  const g = await goodReply;
  t.is(g.type, 'generated');
  t.is(g.outputs.length, 1);
  t.is(server.stats().rejected, 1);
  bad.port2.postMessage('not even an object');
  t.is((await reply(bad.port2)).type, 'error');
  server.close();
  for (const c of [bad, good]) {
    c.port1.close();
    c.port2.close();
  }
});
