import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';

// (slow suite) Another role as a model of its own: `sft --role user` clones a scenario's user from its view of the
// episodes, and `train --roles agent,user` trains it beside the agent.

const TINY = ['--d-model', '32', '--layers', '1', '--context-length', '256'];

test('sft --role user clones the describer; train --roles agent,user trains it with the guesser', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'agent-r1-roles-'));
  const [user, agent, run] = ['user', 'agent', 'run'].map((d) => join(root, d)) as [string, string, string];
  const sft = (extra: string[]) =>
    cli([
      'sft',
      '--scenario',
      'guessing',
      '--episodes',
      '32',
      '--steps',
      '30',
      '--vocab-size',
      '300',
      ...TINY,
      ...extra,
    ]);
  const u = sft([
    '--role',
    'user',
    '--user-policy',
    'noisy',
    '--policy',
    'expert',
    '--eval-episodes',
    '4',
    '--out',
    user,
    '--json',
  ]);
  t.is(u.code, 0, u.stderr.slice(-1500));
  const meta = JSON.parse(readFileSync(join(user, 'model.json'), 'utf8')).meta;
  t.is(meta.role, 'user');
  t.is(meta.user, 'noisy');
  t.is((u.lastJson() as { eval: { episodes: number } }).eval.episodes, 4);
  const a = sft(['--policy', 'expert', '--user-policy', 'noisy', '--out', agent]);
  t.is(a.code, 0, a.stderr.slice(-1500));
  const r = cli([
    ...[
      'train',
      '--algo',
      'grpo',
      '--scenario',
      'guessing',
      '--init',
      `ckpt:${agent}`,
      '--user-policy',
      `ckpt:${user}`,
    ],
    ...['--roles', 'agent,user', '--steps', '1', '--tasks-per-step', '2', '--group', '4', '--eval-every', '0'],
    ...['--out', run],
  ]);
  t.is(r.code, 0, r.stderr.slice(-1500));
  t.true(r.stdout.includes(`user: ckpt:${join(run, 'final', 'user')}\n`), r.stdout);
  t.regex(r.stderr, /roles: the agent and the user \(from ckpt:.*\) trained/);
  t.true(existsSync(join(run, 'final', 'user', 'model.json')));
  const first = JSON.parse(readFileSync(join(run, 'episodes.jsonl'), 'utf8').split('\n')[0]!);
  t.is(first.roles.user.policy.id, 'rl-user');
  t.is(first.roles.user.policy.version, JSON.parse(readFileSync(join(run, 'config.json'), 'utf8')).roles.user);
});
