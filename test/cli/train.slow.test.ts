/**
 * `agent-r1 train` end to end (slow: two training runs): an SFT warm start, then GRPO with a replica
 * and 2 training threads, deterministic whatever plays and trains. What the command refuses is
 * train.test.ts.
 */
import test from 'ava';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { tinyTrainRun } from '../helpers/train-run.ts';

test.serial(
  'agent-r1 train plays half of each rollout on a replica and trains on 2 threads: the same episodes and weights as --no-replica --train-threads 1',
  async (t) => {
    t.timeout(10 * 60_000);
    const dir = await mkdtemp(join(tmpdir(), 'train-cli-'));
    const replica = tinyTrainRun(t, join(dir, 'replica'), ['--train-threads', '2']);
    t.is(replica.episodes.toString().trim().split('\n').length, 16);
    // best/ is a policy checkpoint like final/ (what bench/paper-table.ts --select best-dev loads)
    const best = await GptTrainable.fromCheckpoint(join(dir, 'replica', 'best'));
    t.true(best.model.parameterCount() > 0);
    best.model.dispose();
    const mainOnly = tinyTrainRun(t, join(dir, 'main-only'), ['--no-replica', '--train-threads', '1']);
    t.true(replica.best.equals(mainOnly.best));
    t.true(replica.episodes.equals(mainOnly.episodes));
    t.true(replica.weights.equals(mainOnly.weights));
  },
);
