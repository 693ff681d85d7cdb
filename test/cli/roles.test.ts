import test from 'ava';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';

// Another role as a model of its own: `sft --role user` clones a scenario's user from its view of the
// episodes, and `train --roles agent,user` trains it beside the agent.

const _TINY = ['--d-model', '32', '--layers', '1', '--context-length', '256'];

test('--roles and --role refuse what they cannot train, with exit 2 and the reason', (t) => {
  const out = join(tmpdir(), `agent-r1-roles-never-${process.pid}`);
  const train = (extra: string[]) =>
    cli(['train', '--scenario', 'guessing', '--algo', 'grpo', '--steps', '1', '--out', out, ...extra]);
  const cases: [ReturnType<typeof cli>, RegExp][] = [
    [train(['--roles', 'agent,boss']), /unknown role "boss".*agent, user/],
    [train(['--roles', 'agent,agent']), /--roles names a role twice/],
    [
      train(['--roles', 'agent,user']),
      /--roles user trains the user's model: name the one it starts from with --user-policy ckpt:DIR\|hf:DIR/,
    ],
    [train(['--roles', 'user', '--user-policy', 'noisy']), /--user-policy ckpt:DIR\|hf:DIR \(got noisy\)/],
    [
      cli([
        'train',
        '--algo',
        'grpo',
        '--scenario',
        'calculator',
        '--roles',
        'agent,user',
        '--user-policy',
        'ckpt:x',
        '--out',
        out,
      ]),
      /scenario calculator has no user/,
    ],
    [cli(['sft', '--scenario', 'guessing', '--role', 'boss', '--out', out]), /unknown role "boss"/],
    [
      cli(['sft', '--scenario', 'calculator', '--role', 'user', '--out', out]),
      /--role user: scenario calculator has no user/,
    ],
  ];
  for (const [r, message] of cases) {
    t.is(r.code, 2, r.stderr);
    t.regex(r.stderr, message);
  }
  t.false(existsSync(out));
});
