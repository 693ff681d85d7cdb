/**
 * Batching benchmark (not a test): how the batch queue groups a checkpoint policy's generation
 * requests from two workers, and the policy's share of the wall time. Prints a table; --json prints
 * the figures as one JSON object. The engine's own costs (overhead per step, worker scaling and
 * start-up) are bench/engine.ts's. Run: npx tsx --conditions=source bench/batching.ts [--json]
 */
import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { calculator } from '../scenarios/calculator/index.ts';
import {
  DEFAULT_MODEL_CONFIG,
  GPTModel,
  initBackend,
  loadCheckpointPolicy,
  saveCheckpoint,
  trainTokenizer,
} from '../src/policy/tfjs/index.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { workerThreads } from '../src/rollout/worker-threads.ts';

const flags = new Command().option('--json', 'print the figures as JSON').parse().opts<{ json?: boolean }>();

async function checkpointBatching() {
  await initBackend();
  const calc = calculator as Exclude<typeof calculator, (...args: never[]) => unknown>;
  const texts = calc.tasks({ split: 'train', seed: 0, count: 200 }).map((t) => t.question);
  const tokenizer = trainTokenizer(texts, { vocabSize: 512 });
  const model = new GPTModel({ vocabSize: tokenizer.vocabSize, ...DEFAULT_MODEL_CONFIG }, 1);
  const dir = join(mkdtempSync(join(tmpdir(), 'bench-ckpt-')), 'ckpt');
  await saveCheckpoint(dir, model, tokenizer, {});
  const policy = await loadCheckpointPolicy(dir);
  const rows = [];
  for (const maxBatch of [8, 32]) {
    const executor = workerThreads({ workers: 2, maxBatch });
    const config = { maxTurns: 2, maxTokensPerTurn: 32 };
    const r = await rollout({ scenario: calc, policy, split: 'train', episodes: 64, seed: 1, executor, config });
    await executor.close();
    const s = r.batching!;
    rows.push({
      maxBatch,
      meanBatch: s.meanBatchSize,
      maxObservedBatch: Math.max(...Object.keys(s.batchSizes).map(Number)),
      policyShare: r.throughput.share.policy,
      tokensPerSecond: r.throughput.tokensPerSecond,
    });
  }
  return rows;
}

const batching = await checkpointBatching();
const machine = `${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}`;
if (flags.json) {
  process.stdout.write(`${JSON.stringify({ machine, batching })}\n`);
} else {
  const f = (n: number, d = 1) => n.toFixed(d);
  const rows = batching.map(
    (b) =>
      `| ${b.maxBatch} | ${f(b.meanBatch)} | ${b.maxObservedBatch} | ${f(b.policyShare * 100, 0)}% | ${f(b.tokensPerSecond, 0)} |`,
  );
  const lines = [
    `machine: ${machine}`,
    'checkpoint policy (default size, untrained), calculator, 2 workers',
    '',
    '| --max-batch | mean batch | largest batch | policy share of wall time | tokens/s |',
    '|---|---|---|---|---|',
    ...rows,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
