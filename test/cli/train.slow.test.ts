/**
 * `agent-r1 train` is deterministic whatever plays and trains (slow: two training runs). The fast
 * check of the command is train.test.ts.
 */
import test from 'ava';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyTrainRun } from '../helpers/train-run.ts';

test.serial(
  'agent-r1 train plays half of each rollout on a replica and trains on 2 threads: the same episodes and weights as --no-replica --train-threads 1',
  async (t) => {
    t.timeout(10 * 60_000);
    const dir = await mkdtemp(join(tmpdir(), 'train-cli-'));
    const replica = tinyTrainRun(t, join(dir, 'replica'), ['--train-threads', '2']);
    const mainOnly = tinyTrainRun(t, join(dir, 'main-only'), ['--no-replica', '--train-threads', '1']);
    t.true(replica.best.equals(mainOnly.best));
    t.true(replica.episodes.equals(mainOnly.episodes));
    t.true(replica.weights.equals(mainOnly.weights));
  },
);
