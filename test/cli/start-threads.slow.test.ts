import test from 'ava';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';

// The main job's CI variant on 1 and on 2 training threads: the warm start's and GRPO's gradients
// computed on this thread or on replicas in two others give the same weights, so the same table.
// Slow (npm run test:slow): two quick main jobs.
test('npm start -- --quick with 2 training threads gives the 1-thread run: the same weights and table', async (t) => {
  t.timeout(30 * 60_000);
  const dir = await mkdtemp(join(tmpdir(), 'start-threads-'));
  const runs = [1, 2].map((threads) => {
    const out = join(dir, `threads-${threads}`);
    const r = cli(['start', '--quick', '--json', '--train-threads', String(threads), '--out', out], {
      timeout: 15 * 60_000,
    });
    t.is(r.code, 0, r.stderr.slice(-2000));
    const { seconds: _seconds, ...table } = r.lastJson();
    return {
      table,
      warm: readFileSync(join(out, 'warm-start', 'weights.bin')),
      grpo: readFileSync(join(out, 'grpo', 'final', 'weights.bin')),
      episodes: readFileSync(join(out, 'grpo', 'episodes.jsonl')),
    };
  });
  t.true(runs[0]!.warm.equals(runs[1]!.warm), 'warm start weights');
  t.true(runs[0]!.grpo.equals(runs[1]!.grpo), 'GRPO weights');
  t.true(runs[0]!.episodes.equals(runs[1]!.episodes), 'GRPO episodes');
  t.deepEqual(runs[1]!.table, runs[0]!.table);
});
