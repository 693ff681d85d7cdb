// A whole training run through the CLI (an SFT warm start, then GRPO with a replica and 2 training
// threads) is train.slow.test.ts: here, what the command refuses, and a tiny run's progress lines.
import test from 'ava';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
    /option '--init <ckpt:DIR\|hf:DIR>' argument 'runs\/x' is invalid\. expected hf:DIR/,
    2,
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
    '5000 training threads (a usage error, refused before anything loads)',
    ['train', '--scenario', 'calculator', '--algo', 'grpo', '--out', 'OUT', '--train-threads', '5000'],
    /option '--train-threads <n>' argument '5000' is invalid. expected at most 256 \(more are capped at the cores anyway\)/,
    2,
  ],
  [
    'a billion training threads on sft',
    ['sft', '--scenario', 'calculator', '--out', 'OUT', '--train-threads', '1e9'],
    /option '--train-threads <n>' argument '1e9' is invalid. expected at most 256/,
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
  'agent-r1 sft refuses demonstrations longer than --context-length, saying how many and the length that holds them',
  async (t) => {
    const out = join(await mkdtemp(join(tmpdir(), 'sft-cli-')), 'ckpt');
    const r = cli([
      'sft',
      '--scenario',
      'calculator',
      '--episodes',
      '6',
      '--steps',
      '1',
      '--context-length',
      '64',
      '--out',
      out,
    ]);
    t.is(r.code, 2, r.stderr);
    t.regex(
      r.stderr,
      /^error: 6 of 6 training sequences are longer than --context-length 64 \(the longest: (\d+) tokens, \d+ over\); cut, they would lose their last actions: pass --context-length \1 \(or more\)$/m,
    );
    const longest = /pass --context-length (\d+)/.exec(r.stderr)![1]!;
    const fits = cli([
      'sft',
      ...['--scenario', 'calculator', '--episodes', '6', '--steps', '1', '--eval-episodes', '0'],
      ...['--context-length', longest, '--d-model', '16', '--layers', '1', '--out', out],
    ]);
    t.is(fits.code, 0, fits.stderr);
  },
);

test("train --help says the training config's defaults, and that --eval-every 0 runs no eval", (t) => {
  const help = cli(['train', '--help']).stdout.replace(/\s+/g, ' ');
  t.regex(help, /--steps <n> RL steps \(rollout batches; default 20\)/);
  t.regex(help, /--tasks-per-step <n> tasks per rollout batch \(default 8\)/);
  t.regex(help, /--group <g> samples per task \(default 4\)/);
  t.regex(help, /--lr <x> learning rate \(default 0\.0001\)/);
  t.regex(
    help,
    /--eval-every <k> eval on dev before training, every k steps and after the last \(default 5; 0: no eval\)/,
  );
});

test('sft and train warm-start models of the same default context, and their help says why it is 768', (t) => {
  const sft = cli(['sft', '--help']).stdout.replace(/\s+/g, ' ');
  t.regex(
    sft,
    /--context-length <n> the model's context length in tokens \(default 768, train's: an MCP server's tool schemas alone make prompts of 600\+ tokens\)/,
  );
  const train = cli(['train', '--help']).stdout.replace(/\s+/g, ' ');
  t.regex(train, /--context-length <n> warm start: the model's context length in tokens \(as sft's\) \(default: 768\)/);
});

test.serial(
  'train --scenario, its stderr not a terminal (a log, CI), prints a line per warm-start tenth, step and eval, as train --agent does',
  async (t) => {
    const out = join(await mkdtemp(join(tmpdir(), 'train-lines-')), 'run');
    const r = cli(
      [
        'train',
        ...['--scenario', 'calculator', '--algo', 'grpo', '--steps', '2', '--tasks-per-step', '1', '--group', '2'],
        ...['--demo-episodes', '8', '--sft-steps', '10', '--d-model', '16', '--layers', '1', '--vocab', '300'],
        ...['--eval-every', '2', '--eval-episodes', '2', '--no-replica', '--train-threads', '1', '--out', out],
      ],
      { timeout: 300_000 },
    );
    t.is(r.code, 0, r.stderr);
    t.regex(r.stderr, /^sft step 10\/10: loss \d+\.\d{3}, \d+ tok\/s$/m);
    t.regex(
      r.stderr,
      /^grpo step 1\/2: reward -?\d\.\d{3}, success \d\.\d{3}, KL -?\d\.\d{3}, \d+ failed, \d+ skipped, \d+ tok\/s$/m,
    );
    t.regex(r.stderr, /^grpo step 2\/2: /m);
    t.regex(r.stderr, /^eval on dev at step 2: success \d\.\d{3}, reward -?\d\.\d{3}$/m);
  },
);
