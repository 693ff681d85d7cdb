import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';
import { cli } from './cli.ts';

/** A tiny `agent-r1 train` run on the calculator: 2 GRPO steps from a 2-step SFT warm start, dev evals. */
const TINY_TRAIN = [
  ...['train', '--scenario', 'calculator', '--algo', 'grpo', '--steps', '2', '--tasks-per-step', '2'],
  ...['--group', '4', '--demo-policy', 'expert', '--demo-episodes', '8', '--sft-steps', '2'],
  ...['--d-model', '32', '--layers', '1', '--context-length', '512', '--vocab', '300'],
  ...['--eval-every', '1', '--eval-episodes', '4'],
];

/**
 * Runs the tiny training through the CLI into `out` (with `extra` flags), checks it succeeded and
 * named its best dev checkpoint, and returns the bytes a determinism check compares.
 */
export function tinyTrainRun(t: ExecutionContext, out: string, extra: string[]) {
  const r = cli([...TINY_TRAIN, '--out', out, ...extra], { timeout: 5 * 60_000 });
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
}
