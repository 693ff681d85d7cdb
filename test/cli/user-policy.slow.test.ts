import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadRecords } from '../../src/record/jsonl.ts';
import { cli } from '../helpers/cli.ts';
import { ONE_LAYER_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

// The CLI end of test/cli/user-policy.test.ts: a spawned `train --user-policy hf:DIR` trains the
// agent against a model playing the help desk's customer, and every rollout record names it.

let root: string;
let folder: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-user-policy-'));
  folder = join(root, 'qwen3');
  await writeTinyFolder(folder, {
    ...ONE_LAYER_QWEN3,
    seed: 11,
  });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

test.serial(
  "train --user-policy: the rollouts' user is that policy (a model here), recorded; not with --agent",
  async (t) => {
    const out = join(root, 'train');
    const r = cli([
      'train',
      ...['--algo', 'grpo', '--scenario', 'helpdesk', '--user-policy', `hf:${folder}`, '--steps', '1'],
      ...['--tasks-per-step', '1', '--group', '2', '--demo-episodes', '4', '--sft-steps', '1'],
      ...['--d-model', '16', '--layers', '1', '--eval-every', '0', '--out', out],
    ]);
    t.is(r.code, 0, r.stderr);
    const { records } = await loadRecords(join(out, 'episodes.jsonl'));
    t.is(records.length, 2);
    for (const record of records) t.is(record.roles!.user!.policy.id, `hf:${folder}`);
    const agent = cli([
      'train',
      '--algo',
      'grpo',
      '--agent',
      'examples/ai-sdk-agent',
      '--user-policy',
      'scripted',
      '--out',
      join(root, 'a'),
    ]);
    t.is(agent.code, 2);
    t.regex(agent.stderr, /--user-policy is for a scenario with a user/);
  },
);
