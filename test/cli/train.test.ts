import test from 'ava';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { cli } from '../helpers/cli.ts';

const errors: Array<[string, string[], RegExp, number]> = [
  [
    'an unknown algorithm',
    ['train', '--scenario', 'calculator', '--algo', 'dpo', '--out', 'OUT'],
    /unknown algorithm "dpo"; valid: grpo, ppo, reinforce\+\+, rloo/,
    1,
  ],
  [
    'a bad learning rate',
    ['train', '--scenario', 'calculator', '--algo', 'grpo', '--out', 'OUT', '--lr', '-1'],
    /bad training config: lr/,
    1,
  ],
  [
    'a bad --init',
    ['train', '--scenario', 'calculator', '--algo', 'grpo', '--out', 'OUT', '--init', 'runs/x'],
    /--init must be ckpt:DIR/,
    1,
  ],
  [
    'a missing checkpoint',
    ['train', '--scenario', 'calculator', '--algo', 'grpo', '--out', 'OUT', '--init', 'ckpt:/nonexistent/ckpt'],
    /cannot read checkpoint/,
    1,
  ],
  ['a missing --algo', ['train', '--scenario', 'calculator', '--out', 'OUT'], /required option '--algo <algo>'/, 2],
  [
    'zero training threads',
    ['train', '--scenario', 'calculator', '--algo', 'grpo', '--out', 'OUT', '--train-threads', '0'],
    /option '--train-threads <n>' argument '0' is invalid. expected a positive integer/,
    2,
  ],
  [
    'an unknown scenario',
    ['train', '--scenario', 'nope', '--algo', 'grpo', '--out', 'OUT'],
    /unknown scenario "nope"/,
    2,
  ],
];

for (const [what, args, pattern, code] of errors) {
  test.serial(`train with ${what} fails with a clear message`, async (t) => {
    const out = join(await mkdtemp(join(tmpdir(), 'train-cli-')), 'run');
    const r = cli(args.map((a) => (a === 'OUT' ? out : a)));
    t.is(r.code, code, r.stderr);
    t.regex(r.stderr, pattern);
  });
}

test.serial(
  'agent-r1 train plays half of each rollout on a replica and trains on 2 threads: the same episodes and weights as --no-replica --train-threads 1',
  async (t) => {
    t.timeout(5 * 60_000);
    const dir = await mkdtemp(join(tmpdir(), 'train-cli-'));
    const args = [
      'train',
      '--scenario',
      'calculator',
      '--algo',
      'grpo',
      '--steps',
      '2',
      '--tasks-per-step',
      '2',
      '--group',
      '4',
      '--demo-policy',
      'expert',
      '--demo-episodes',
      '8',
      '--sft-steps',
      '2',
      '--d-model',
      '32',
      '--layers',
      '1',
      '--context',
      '512',
      '--vocab',
      '300',
      '--eval-every',
      '1',
      '--eval-episodes',
      '4',
    ];
    const runs = ['replica', 'main-only'].map((name, i) => {
      const out = join(dir, name);
      const threads = i === 1 ? ['--no-replica', '--train-threads', '1'] : ['--train-threads', '2'];
      const r = cli([...args, '--out', out, ...threads], { timeout: 5 * 60_000 });
      t.is(r.code, 0, r.stderr.slice(-2000));
      // the policy of the best dev eval after step 0 is kept apart, and the CLI says where
      const best = JSON.parse(readFileSync(join(out, 'best', 'best.json'), 'utf8'));
      t.true(
        r.stdout.includes(
          `best dev checkpoint (step ${best.step}, dev ${best.devScore.toFixed(3)}): ckpt:${join(out, 'best')}\n`,
        ),
        r.stdout,
      );
      return {
        episodes: readFileSync(join(out, 'episodes.jsonl')),
        weights: readFileSync(join(out, 'final', 'weights.bin')),
        best: readFileSync(join(out, 'best', 'weights.bin')),
      };
    });
    t.true(runs[0]!.best.equals(runs[1]!.best));
    // best/ is a policy checkpoint like final/ (what bench/paper-table.ts --select best-dev loads)
    const best = await GptTrainable.fromCheckpoint(join(dir, 'replica', 'best'));
    t.true(best.model.parameterCount() > 0);
    best.model.dispose();
    t.is(runs[0]!.episodes.toString().trim().split('\n').length, 16);
    t.true(runs[0]!.episodes.equals(runs[1]!.episodes));
    t.true(runs[0]!.weights.equals(runs[1]!.weights));
  },
);
