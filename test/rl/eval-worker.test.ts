import test from 'ava';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { EvalWorker } from '../../src/rl/eval-worker.ts';
import { evaluateMethod } from '../../src/rl/paper.ts';
import { sftWarmStart } from '../../src/rl/warm-start.ts';
import { loadScenario } from '../../src/scenario/load.ts';

// The evaluation worker is a real Piscina thread with its own tfjs backend, loading the checkpoint
// from disk: its episodes must be the in-process episodes, byte for byte.
test('a checkpoint plays the same episodes in the evaluation worker as in-process; a bad checkpoint fails that job only', async (t) => {
  t.timeout(5 * 60_000);
  const backend = await initBackend();
  const scenario = await loadScenario('calculator', builtinScenarios);
  const expert = await scenario.policies.expert!({ scenario, seed: 3 });
  const ws = await sftWarmStart({
    scenario,
    demoPolicy: expert,
    episodes: 48,
    seed: 3,
    steps: 20,
    batchSize: 8,
    lr: 1e-2,
    vocabSize: 300,
    model: { dModel: 32, nLayers: 1, nHeads: 2, contextLength: 512 },
  });
  const dir = join(await mkdtemp(join(tmpdir(), 'eval-worker-')), 'ckpt');
  await ws.trainable.save(dir);
  const here = await evaluateMethod(scenario, 'sft', ws.trainable.policy({ temperature: 0 }), 'test', 12, 5, { maxTurns: 3, maxTokensPerTurn: 48 });
  ws.trainable.model.dispose();

  const worker = new EvalWorker(scenario, backend.name);
  try {
    const missing = join(dir, '..', 'no-such-checkpoint');
    const bad = await t.throwsAsync(worker.evaluate({ checkpoint: missing, method: 'x', split: 'test', episodes: 12, seed: 5 }), { instanceOf: TrainingError });
    t.true(bad!.message.includes(missing), bad!.message);
    const there = await worker.evaluate({ checkpoint: dir, policyId: 'rl', method: 'sft', split: 'test', episodes: 12, seed: 5, episode: { maxTurns: 3, maxTokensPerTurn: 48 } });
    // The digest covers every generated token, observation and reward: byte-identical episodes.
    t.regex(here.digest ?? '', /^[0-9a-f]{64}$/);
    t.deepEqual(there.score, here);
    t.is(there.score.episodes, 12);
    t.true(there.seconds > 0);
  } finally {
    await worker.close();
  }
});
