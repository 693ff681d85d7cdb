import test from 'ava';
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRolloutCommand, type RolloutFlags } from '../../src/cli/commands/rollout.ts';
import { loadCheckpoint, saveCheckpoint } from '../../src/policy/tfjs/checkpoint.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { cli } from '../helpers/cli.ts';
import { calculatorCheckpoint } from '../openai/fixtures.ts';

// `eval --temperature` replaces a checkpoint's own sampling (e.g. greedy evaluation of an RL
// checkpoint, which samples at 1), and its records say so in the policy version.

const evalRun = async (dir: string, temperature?: number, workers = 0) => {
  const out = mkdtempSync(join(tmpdir(), 'agent-r1-eval-t-'));
  const flags: RolloutFlags = {
    scenario: 'calculator',
    split: 'train',
    policy: `ckpt:${dir}`,
    episodes: 8,
    seed: 5,
    group: 1,
    concurrency: 8,
    workers,
    maxBatch: 8,
    temperature,
    out,
  };
  await runRolloutCommand(flags);
  const file = join(out, 'episodes.jsonl');
  return { records: (await loadRecords(file)).records, bytes: await readFile(file, 'utf8') };
};
const actions = (rs: Awaited<ReturnType<typeof evalRun>>['records']) => rs.map((r) => r.turns.map((turn) => turn.text));

test('--temperature overrides the checkpoint sampling; the records name the override in the policy version', async (t) => {
  const { dir: greedyDir } = await calculatorCheckpoint(); // saved greedy
  // the same weights, saved to sample at temperature 2
  const ckpt = await loadCheckpoint(greedyDir);
  const hotDir = join(mkdtempSync(join(tmpdir(), 'agent-r1-hot-')), 'ckpt');
  await saveCheckpoint(hotDir, ckpt.model, ckpt.tokenizer, { sampling: { temperature: 2 } });
  ckpt.model.dispose();

  const greedy = await evalRun(greedyDir);
  const hot = await evalRun(hotDir);
  const hotAsGreedy = await evalRun(hotDir, 0);
  const hash = greedy.records[0]!.policy.version;
  t.regex(hash, /^[0-9a-f]{64}$/);
  t.is(hot.records[0]!.policy.version, hash, 'same weights, same content hash');
  t.is(hotAsGreedy.records[0]!.policy.version, `${hash}+temperature=0`);
  t.not(hotAsGreedy.records[0]!.runId, hot.records[0]!.runId);
  t.notDeepEqual(actions(hot.records), actions(greedy.records), 'saved at temperature 2, it samples other actions');
  t.deepEqual(
    actions(hotAsGreedy.records),
    actions(greedy.records),
    '--temperature 0 decodes greedily whatever the checkpoint says',
  );
  // on worker threads (the model behind the policy server): the same records, byte for byte
  t.is((await evalRun(hotDir, 0, 2)).bytes, hotAsGreedy.bytes);
});

test.serial('--temperature with a scripted policy is a usage error (exit 2)', (t) => {
  const r = cli(['eval', '--scenario', 'calculator', '--policy', 'expert', '--temperature', '0', '--episodes', '2']);
  t.is(r.code, 2);
  t.regex(r.stderr, /a temperature applies to model policies \(ckpt:DIR, hf:DIR\), not to "expert"/);
});
