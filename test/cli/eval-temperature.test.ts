import test from 'ava';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRolloutCommand, type RolloutFlags } from '../../src/cli/commands/rollout.ts';
import { loadRecords } from '../../src/replay/jsonl.ts';
import { cli } from '../helpers/cli.ts';
import { calculatorCheckpoint } from '../openai/fixtures.ts';

// `eval --temperature` replaces a checkpoint's own sampling (e.g. greedy evaluation of an RL
// checkpoint saved to sample at 1), and its records say so in the policy version.

const evalRecords = async (dir: string, temperature?: number) => {
  const out = mkdtempSync(join(tmpdir(), 'agent-r1-eval-t-'));
  const flags: RolloutFlags = { scenario: 'calculator', split: 'train', policy: `ckpt:${dir}`, episodes: 8, seed: 5, group: 1, concurrency: 8, workers: 0, maxBatch: 8, temperature, out };
  await runRolloutCommand(flags);
  return (await loadRecords(join(out, 'episodes.jsonl'))).records;
};

test('--temperature overrides the checkpoint sampling; the records name the override in the policy version', async (t) => {
  const { dir } = await calculatorCheckpoint(); // saved greedy
  const saved = await evalRecords(dir);
  const greedy = await evalRecords(dir, 0);
  const hot = await evalRecords(dir, 2);
  const hash = saved[0]!.policy.version;
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.is(greedy[0]!.policy.version, `${hash}+temperature=0`);
  t.is(hot[0]!.policy.version, `${hash}+temperature=2`);
  t.is(new Set([saved, greedy, hot].map((rs) => rs[0]!.runId)).size, 3, 'three settings, three run ids');
  const actions = (rs: typeof saved) => rs.map((r) => r.turns.map((turn) => turn.text));
  t.deepEqual(actions(greedy), actions(saved), 'temperature 0 is what the greedy checkpoint does anyway');
  t.notDeepEqual(actions(hot), actions(saved), 'temperature 2 samples other actions');
});

test('--temperature with a scripted policy is refused with a clear error', (t) => {
  const r = cli(['eval', '--scenario', 'calculator', '--policy', 'expert', '--temperature', '0', '--episodes', '2']);
  t.not(r.code, 0);
  t.regex(r.stderr, /a temperature applies to checkpoint policies \(ckpt:DIR\), not to "expert"/);
});
