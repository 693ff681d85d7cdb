import test from 'ava';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRolloutCommand, type RolloutFlags } from '../../src/cli/commands/rollout.ts';
import type { LoadDtype } from '../../src/hf/folder.ts';
import { ONE_LAYER_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

// `--dtype auto|f32` says how a Hugging Face model's weights are held: a BF16 checkpoint's matrices
// stay 16-bit (auto) or are widened (f32). The kernel widens each lane exactly, so the two sample
// the same tokens: records are the same bytes, and the policy version does not change.

let root: string;
let dir: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-load-dtype-'));
  dir = join(root, 'qwen3-bf16');
  await writeTinyFolder(dir, {
    ...ONE_LAYER_QWEN3,
    dtype: 'BF16',
    seed: 7,
  });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const rolloutBytes = async (dtype?: LoadDtype) => {
  const out = await mkdtemp(join(root, 'run-'));
  const flags: RolloutFlags = {
    scenario: 'calculator',
    split: 'train',
    policy: `hf:${dir}`,
    episodes: 4,
    seed: 3,
    group: 1,
    concurrency: 4,
    workers: 0,
    maxBatch: 4,
    maxTurns: 2,
    maxTokensPerTurn: 12,
    dtype,
    out,
  };
  await runRolloutCommand(flags);
  return readFile(join(out, 'episodes.jsonl'), 'utf8');
};

test('a BF16 model held 16-bit or widened to f32 samples the same records, byte for byte', async (t) => {
  const kept = await rolloutBytes();
  t.true(kept.length > 0);
  t.is(await rolloutBytes('F32'), kept);
  t.is(await rolloutBytes('auto'), kept);
});

test('--dtype with a scripted policy is refused: it holds no weights', async (t) => {
  const flags: RolloutFlags = {
    scenario: 'calculator',
    split: 'train',
    policy: 'expert',
    episodes: 1,
    seed: 0,
    group: 1,
    concurrency: 1,
    workers: 0,
    maxBatch: 1,
    dtype: 'F32',
  };
  await t.throwsAsync(runRolloutCommand(flags), { message: /--dtype applies to model policies/ });
});
