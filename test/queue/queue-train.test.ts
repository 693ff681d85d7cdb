import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { GPTModel, initBackend, saveCheckpoint, trainTokenizer } from '../../src/policy/tfjs/index.ts';
import { QueueExecutor } from '../../src/queue/queue-executor.ts';
import { QueueWorker } from '../../src/queue/queue-worker.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { load, trusting } from '../helpers/queue.ts';
import { startRedis } from '../helpers/redis.ts';

test('a GRPO step whose rollouts go through the queue gives the weights and records of a local one', async (t) => {
  t.timeout(4 * 60_000);
  const redis = await startRedis();
  t.teardown(() => redis.dispose());
  await initBackend();
  const scenario = await load('calculator', {});
  const texts = (await scenario.tasks({ split: 'train', seed: 0, count: 40 })).map((task) => task.question);
  const tokenizer = trainTokenizer(texts, { vocabSize: 300 });
  const model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 256, dMlp: 32 },
    3,
  );
  const ckpt = join(mkdtempSync(join(tmpdir(), 'agent-r1-ckpt-')), 'ckpt');
  await saveCheckpoint(ckpt, model, tokenizer, { sampling: { temperature: 1 } });
  const config = resolveConfig({
    algo: 'grpo',
    seed: 3,
    steps: 1,
    tasksPerStep: 3,
    group: 2,
    minibatch: 6,
    epochs: 1,
    lr: 0.05,
    evalEvery: 0,
    evalEpisodes: 2,
    checkpointEvery: 1,
    taskPool: 12,
  });
  const episode = { maxTurns: 2, maxTokensPerTurn: 12, maxTotalTokens: 200 };
  const run = async (executor?: QueueExecutor) => {
    const trainable = await GptTrainable.fromCheckpoint(ckpt);
    const outDir = mkdtempSync(join(tmpdir(), 'agent-r1-train-'));
    await train({ scenario, model: trainable, config, outDir, episode, executor });
    const weights = trainable.variables.map((v) => Array.from(v.dataSync()));
    return { weights, records: readFileSync(join(outDir, 'episodes.jsonl'), 'utf8') };
  };
  const local = await run();
  const worker = await QueueWorker.start({
    url: redis.url,
    name: 'w',
    threads: 1,
    loadScenario: trusting(),
    cacheDir: mkdtempSync(join(tmpdir(), 'agent-r1-cache-')),
  });
  const executor = new QueueExecutor({ url: redis.url, chunkSize: 4 });
  try {
    const queued = await run(executor);
    t.is(queued.records, local.records);
    t.is(queued.records.trim().split('\n').length, 6);
    t.deepEqual(queued.weights, local.weights);
    t.is(executor.stats.workers.w, 6);
  } finally {
    await executor.close();
    await worker.stop(1000);
  }
});
