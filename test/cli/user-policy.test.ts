import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { helpdesk } from '../../scenarios/helpdesk/index.ts';
import { runRolloutCommand, type RolloutFlags } from '../../src/cli/commands/rollout.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { ONE_LAYER_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

// `--user-policy`: a model plays the help desk's customer. Its turns record their sampled ids and
// log-probs as the agent's do, and the records replay without the model.

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

const flags = (extra: Partial<RolloutFlags>): RolloutFlags => ({
  scenario: 'helpdesk',
  split: 'test',
  policy: 'expert',
  episodes: 2,
  seed: 4,
  group: 1,
  concurrency: 2,
  workers: 2,
  maxBatch: 4,
  maxTurns: 3,
  maxTokensPerTurn: 40,
  ...extra,
});

test('a Hugging Face model plays the user: its ids and log-probs are recorded, and replay needs no model', async (t) => {
  const out = await mkdtemp(join(root, 'run-'));
  await runRolloutCommand(flags({ userPolicy: `hf:${folder}`, out }));
  const { records } = await loadRecords(join(out, 'episodes.jsonl'));
  t.is(records.length, 2);
  for (const record of records) {
    t.is(record.roles!.user!.policy.id, `hf:${folder}`);
    const steps = record.turns.flatMap((turn) => turn.reply?.steps ?? []);
    t.true(steps.length > 0);
    for (const step of steps) {
      t.true(step.tokens!.length > 0);
      t.is(step.logprobs!.length, step.tokens!.length);
    }
    const replayed = await replayRecord(record, helpdesk as unknown as Scenario);
    t.true(replayed.verified, JSON.stringify(replayed.divergence));
  }
});

test('--user-policy: an unknown name lists the choices; a scenario without a user refuses it', async (t) => {
  await t.throwsAsync(runRolloutCommand(flags({ userPolicy: 'grumpy' })), {
    message: /user policy.*grumpy.*scripted/s,
  });
  await t.throwsAsync(runRolloutCommand(flags({ scenario: 'calculator', userPolicy: 'scripted' })), {
    message: /scenario calculator has no user/,
  });
  await t.throwsAsync(runRolloutCommand(flags({ userPolicy: 'scripted', queue: 'redis://127.0.0.1:1' })), {
    message: /--user-policy plays in this thread/,
  });
});
