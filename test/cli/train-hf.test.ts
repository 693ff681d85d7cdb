import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

const root = mkdtempSync(join(tmpdir(), 'agent-r1-train-hf-'));
const dir = join(root, 'tiny-qwen3');
test.before(async () => {
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 16,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 8,
    intermediate: 32,
    seed: 5,
    embedStd: 0.2,
  });
});
test.after.always(() => rmSync(root, { recursive: true, force: true }));

test.serial(
  'sft --init hf:DIR, then train --init ckpt:DIR with GRPO: each saves a Hugging Face checkpoint whose weights moved, and the records replay',
  (t) => {
    const sft = join(root, 'sft');
    const a = cli(
      [
        'sft',
        '--scenario',
        'calculator',
        '--init',
        `hf:${dir}`,
        '--episodes',
        '2',
        '--steps',
        '2',
        '--batch-size',
        '2',
        '--eval-episodes',
        '2',
        '--out',
        sft,
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(a.code, 0, a.stderr);
    const s = a.lastJson();
    t.like(s, { steps: 2, sequences: 2, init: `hf:${dir}`, eval: { episodes: 2 } });
    t.like(JSON.parse(readFileSync(join(sft, 'checkpoint.json'), 'utf8')), { format: 'agent-r1-hf', hash: s.hash });
    const out = join(root, 'grpo');
    const b = cli(
      [
        'train',
        '--scenario',
        'calculator',
        '--init',
        `ckpt:${sft}`,
        '--algo',
        'grpo',
        '--steps',
        '1',
        '--tasks-per-step',
        '1',
        '--group',
        '2',
        '--entropy-coef',
        '0.01',
        '--eval-episodes',
        '2',
        '--out',
        out,
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(b.code, 0, b.stderr);
    const step = b.lastJson().lastStep;
    t.is(step.episodes, 2);
    t.true(existsSync(join(out, 'final', 'checkpoint.json')));
    const final = JSON.parse(readFileSync(join(out, 'final', 'checkpoint.json'), 'utf8')).hash;
    t.not(
      final,
      s.hash,
      'the update changed the weights (the entropy bonus moves them even when both samples score alike)',
    );
    const replay = cli(['replay', join(out, 'episodes.jsonl'), '--quiet', '--json']);
    t.is(replay.code, 0, replay.stderr);
    t.like(replay.lastJson(), { verified: 2, diverged: 0 });
  },
);

test.serial(
  'train --init of a Hugging Face model refuses PPO (no value head), and an --init that is neither kind',
  (t) => {
    const ppo = cli([
      'train',
      '--scenario',
      'calculator',
      '--init',
      `hf:${dir}`,
      '--algo',
      'ppo',
      '--steps',
      '1',
      '--out',
      join(root, 'ppo'),
    ]);
    t.is(ppo.code, 1);
    t.regex(ppo.stderr, /PPO needs a model with a value head/);
    const bad = cli([
      'train',
      '--scenario',
      'calculator',
      '--algo',
      'grpo',
      '--init',
      dir,
      '--steps',
      '1',
      '--out',
      join(root, 'bad'),
    ]);
    t.is(bad.code, 2);
    t.regex(bad.stderr, /expected hf:DIR .* or ckpt:DIR/);
    const sft = cli(['sft', '--scenario', 'calculator', '--init', dir, '--out', join(root, 'bad-sft')]);
    t.is(sft.code, 2);
    t.regex(sft.stderr, /expected hf:DIR .* or ckpt:DIR/);
  },
);
