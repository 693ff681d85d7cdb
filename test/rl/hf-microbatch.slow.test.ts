import test from 'ava';

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { sequencesFromRecords } from '../../src/policy/tfjs/sft.ts';
import { HfTrainable } from '../../src/rl/hf-trainable.ts';
import { sftTrainable } from '../../src/rl/sft-trainable.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { TRAINABLE_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

// Beside hf-trainable.slow.test.ts: an SFT step of the small Qwen3 three times over (~30 s).
let root: string;
let dir: string;
test.before(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-trainable-'));
  dir = join(root, 'qwen3');
  await writeTinyFolder(dir, { ...TRAINABLE_QWEN3, seed: 21 });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

test('SFT in micro-batches (1, 2 or all 4 sequences per forward pass) makes the same update; a micro-batch that is not a count is refused', async (t) => {
  const scenario = await loadScenario('calculator', builtinScenarios, {});
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 0),
    split: 'train',
    episodes: 4,
    seed: 2,
  });
  const run = async (microbatch: number) => {
    const trainable = await HfTrainable.load(dir, { id: 'sft' });
    const sequences = sequencesFromRecords(records, trainable.encoding.withTools(openAITools(scenario)));
    const losses: number[] = [];
    await sftTrainable(trainable, {
      sequences,
      steps: 1,
      batchSize: 4,
      microbatch,
      lr: 1e-2,
      seed: 1,
      onStep: (s) => losses.push(s.loss),
    });
    const weights = await Promise.all(trainable.variables.map(async (v) => (await v.data()) as Float32Array));
    return { losses, weights, trainable };
  };
  const base = await Promise.all(
    (await HfTrainable.load(dir, { id: 'base' })).variables.map(async (v) => (await v.data()) as Float32Array),
  );
  const whole = await run(4);
  for (const microbatch of [1, 2]) {
    const parts = await run(microbatch);
    parts.losses.forEach((loss, i) =>
      t.true(Math.abs(loss - whole.losses[i]!) < 1e-5, `${loss} vs ${whole.losses[i]}`),
    );
    // Float32 sums in another order: Adam's first steps magnify that only where a gradient is ~0.
    let [gap, update] = [0, 0];
    parts.weights.forEach((w, i) =>
      w.forEach((x, j) => {
        gap += (x - whole.weights[i]![j]!) ** 2;
        update += (whole.weights[i]![j]! - base[i]![j]!) ** 2;
      }),
    );
    const relative = Math.sqrt(gap / update);
    t.true(relative < 1e-3, `microbatch ${microbatch}: the update within ${relative} (relative L2) of one pass's`);
  }
  await t.throwsAsync(
    sftTrainable(whole.trainable, {
      sequences: sequencesFromRecords(records, whole.trainable.encoding),
      steps: 1,
      batchSize: 4,
      microbatch: 0,
      lr: 1e-2,
      seed: 1,
    }),
    { message: /microbatch must be an integer ≥ 1, got 0/ },
  );
});
