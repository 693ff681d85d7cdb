import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { cli } from '../helpers/cli.ts';

test('two rollouts with the same seed write byte-identical episodes.jsonl; another seed differs', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-det-'));
  const run = (name: string, seed: string) => {
    const r = cli([
      'rollout',
      '--scenario',
      'calculator',
      '--policy',
      'random',
      '--episodes',
      '60',
      '--seed',
      seed,
      '--out',
      join(dir, name),
      '--json',
    ]);
    t.is(r.code, 0, r.stderr);
    return readFileSync(join(dir, name, 'episodes.jsonl'));
  };
  const a = run('a', '7');
  const b = run('b', '7');
  const c = run('c', '8');
  t.true(a.equals(b));
  t.false(a.equals(c));
  t.is(a.toString().trim().split('\n').length, 60);
});
