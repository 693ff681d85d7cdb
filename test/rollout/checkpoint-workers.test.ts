import type { Scenario } from '../../src/scenario/scenario.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { calculator } from '../../scenarios/calculator/index.ts';
import {
  GPTModel,
  initBackend,
  loadCheckpointPolicy,
  saveCheckpoint,
  trainTokenizer,
} from '../../src/policy/tfjs/index.ts';
import type { BatchPolicy } from '../../src/policy/policy.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { workerThreads } from '../../src/rollout/worker-threads.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';

const calc = calculator as unknown as Scenario;
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
const config = { maxTurns: 2, maxTokensPerTurn: 20, maxTotalTokens: 400 };

/** A small untrained checkpoint: random weights, a tokenizer trained on calculator text. */
async function tinyPolicy(): Promise<BatchPolicy> {
  await initBackend();
  const texts = (await calc.tasks({ split: 'train', seed: 0, count: 50 })).flatMap((task) => [
    task.question,
    `<tool_call>{"name": "calculate", "arguments": {"expression": "${task.meta!.expression}"}}</tool_call>`,
  ]);
  const tokenizer = trainTokenizer(texts, { vocabSize: 400 });
  const model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 1, nHeads: 2, contextLength: 512, dMlp: 64 },
    5,
  );
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
    const executor = workerThreads({ workers, maxBatch });
    const { records } = await rollout({ ...options, executor });
    await executor.close();
    t.is(bytes(records), expected, `${workers} workers, max batch ${maxBatch}`);
  }
  for (const record of single.records) t.true((await replayRecord(record, calc)).verified);
});

test("the batch queue merges two workers' requests into one batch", async (t) => {
  const policy = await tinyPolicy();
  const executor = workerThreads({ workers: 2, maxBatch: 8, maxWaitMs: 3000 });
  const options = { scenario: calc, policy, split: 'train', episodes: 16, seed: 2, concurrency: 4, config };
  const result = await rollout({ ...options, executor });
  await executor.close();
  const sizes = Object.keys(result.batching!.batchSizes).map(Number);
  // Each worker has at most 4 episodes in flight: a batch above 4 holds rows from both.
  t.true(Math.max(...sizes) > 4, `batch sizes ${JSON.stringify(result.batching!.batchSizes)}`);
  t.true(result.throughput.share.policy > 0);
});
