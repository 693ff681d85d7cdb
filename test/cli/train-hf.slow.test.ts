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
  'train --algo ppo --init hf:DIR trains a value head beside the model and saves it, and an --init that is neither kind is refused',
  (t) => {
    const out = join(root, 'ppo');
    const ppo = cli(
      [
        'train',
        '--scenario',
        'calculator',
        '--init',
        `hf:${dir}`,
        '--algo',
        'ppo',
        '--steps',
        '1',
        '--tasks-per-step',
        '1',
        '--group',
        '2',
        '--eval-episodes',
        '1',
        '--out',
        out,
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(ppo.code, 0, ppo.stderr);
    const step = ppo.lastJson().lastStep;
    t.true(Number.isFinite(step.valueLoss), `value loss ${step.valueLoss}`);
    t.true(existsSync(join(out, 'final', 'value_head.safetensors')));
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

test.serial(
  'sft --init hf:DIR --lora R saves PEFT adapters over the folder; train --init ckpt: of them continues the adapters',
  (t) => {
    const sft = join(root, 'sft-lora');
    const a = cli(
      [
        'sft',
        '--scenario',
        'calculator',
        '--init',
        `hf:${dir}`,
        '--lora',
        '2',
        '--lora-alpha',
        '8',
        '--episodes',
        '2',
        '--steps',
        '2',
        '--batch-size',
        '2',
        '--eval-episodes',
        '0',
        '--out',
        sft,
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(a.code, 0, a.stderr);
    t.like(JSON.parse(readFileSync(join(sft, 'adapter_config.json'), 'utf8')), { r: 2, lora_alpha: 8 });
    t.like(JSON.parse(readFileSync(join(sft, 'checkpoint.json'), 'utf8')), { base: { dir }, hash: a.lastJson().hash });
    t.false(existsSync(join(sft, 'model.safetensors')), 'only the adapters are saved');
    const out = join(root, 'grpo-lora');
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
        '1',
        '--out',
        out,
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(b.code, 0, b.stderr);
    t.regex(b.stderr, /LoRA: rank 2, alpha 8, 512 trained parameters; the base frozen/);
    t.like(JSON.parse(readFileSync(join(out, 'final', 'adapter_config.json'), 'utf8')), { r: 2, lora_alpha: 8 });
    // Asking for other adapters than the checkpoint's is refused.
    const other = cli([
      'train',
      '--scenario',
      'calculator',
      '--init',
      `ckpt:${sft}`,
      '--lora',
      '4',
      '--algo',
      'grpo',
      '--steps',
      '1',
      '--out',
      join(root, 'other-lora'),
    ]);
    t.is(other.code, 1);
    t.regex(other.stderr, /holds rank-2 adapters \(alpha 8\); --lora 4 --lora-alpha 8 asks for others/);
  },
);

test.serial(
  '--lora without a Hugging Face --init, --lora-alpha without --lora, and a rank that is not one are refused in one line',
  (t) => {
    const cases: Array<[string[], number, RegExp]> = [
      [
        ['train', '--algo', 'grpo', '--lora', '4'],
        2,
        /--lora trains adapters on a Hugging Face model: give --init hf:DIR/,
      ],
      [['train', '--algo', 'grpo', '--init', `hf:${dir}`, '--lora-alpha', '8'], 2, /--lora-alpha needs --lora R/],
      [['train', '--algo', 'grpo', '--init', `hf:${dir}`, '--lora', '0'], 2, /--lora <R>.*expected a positive integer/],
      [
        ['train', '--algo', 'grpo', '--init', `hf:${dir}`, '--lora', '2', '--lora-alpha', '-1'],
        2,
        /expected a positive number/,
      ],
      [['sft', '--lora', '4'], 2, /--lora trains adapters on a Hugging Face model/],
      [
        ['sft', '--init', `hf:${dir}`, '--lora', '64', '--episodes', '1'],
        1,
        /--lora \(rank\): must be an integer from 1 to 8 \(got 64\)/,
      ],
    ];
    for (const [args, code, message] of cases) {
      const r = cli([...args, '--scenario', 'calculator', '--steps', '1', '--out', join(root, `bad-${Math.random()}`)]);
      t.is(r.code, code, `${args.join(' ')}: ${r.stderr}`);
      t.regex(r.stderr, message);
      t.is(
        r.stderr
          .trim()
          .split('\n')
          .filter((l) => /error/i.test(l)).length <= 1,
        true,
        r.stderr,
      );
    }
  },
);

test.serial(
  'sft and train --init hf:DIR on 1 and 2 --train-threads (every weight, and LoRA): the same checkpoints, bit for bit',
  (t) => {
    const hashes = (threads: number, lora: string[]) => {
      const tag = `${threads}${lora.length ? '-lora' : ''}`;
      const sft = join(root, `threads-sft-${tag}`);
      const a = cli(
        [
          ...['sft', '--scenario', 'calculator', '--init', `hf:${dir}`, ...lora],
          ...['--episodes', '4', '--steps', '2', '--batch-size', '4', '--eval-episodes', '0'],
          ...['--train-threads', String(threads), '--out', sft, '--json'],
        ],
        { timeout: 300_000 },
      );
      t.is(a.code, 0, a.stderr);
      const out = join(root, `threads-grpo-${tag}`);
      const b = cli(
        [
          ...['train', '--scenario', 'calculator', '--init', `ckpt:${sft}`, '--algo', 'grpo'],
          ...['--steps', '1', '--tasks-per-step', '2', '--group', '2', '--entropy-coef', '0.01', '--eval-every', '0'],
          ...['--train-threads', String(threads), '--out', out, '--json'],
        ],
        { timeout: 300_000 },
      );
      t.is(b.code, 0, b.stderr);
      return [a.lastJson().hash, JSON.parse(readFileSync(join(out, 'final', 'checkpoint.json'), 'utf8')).hash];
    };
    for (const lora of [[], ['--lora', '2']]) {
      const one = hashes(1, lora);
      t.not(one[0], one[1], 'GRPO moved the weights');
      t.deepEqual(hashes(2, lora), one, `${lora.length ? 'LoRA' : 'every weight'}: 2 threads give 1 thread's weights`);
    }
    // More threads than cores: capped, and said.
    const many = cli(
      [
        ...['sft', '--scenario', 'calculator', '--init', `hf:${dir}`, '--episodes', '2', '--steps', '1'],
        ...['--batch-size', '2', '--eval-episodes', '0', '--train-threads', '200', '--out', join(root, 'threads-many')],
      ],
      { timeout: 300_000 },
    );
    t.is(many.code, 0, many.stderr);
    t.regex(many.stderr, /training on \d+ threads: 200 asked, this machine has \d+ cores/);
  },
);
