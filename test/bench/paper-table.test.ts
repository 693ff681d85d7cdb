import test from 'ava';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mergeRuns, parsePaperTableArgs } from '../../bench/paper-table-options.ts';
import { paperTable as bench } from '../helpers/cli.ts';

// bench/paper-table.ts runs for hours; a wrong flag or an unmergeable run must fail at once, before any SFT.

const bad: [string[], RegExp][] = [
  [['--rl', 'nope'], /--rl must be JSON/],
  [['--rl', '[1]'], /--rl must be a JSON object/],
  [['--rl', '{"stepz":3}'], /--rl: unknown or fixed fields stepz/],
  [['--rl', '{"seed":3}'], /--rl: unknown or fixed fields seed/],
  [['--rl', '{"lr":-1}'], /bad training config: lr/],
  [['--sft-steps', '0'], /--sft-steps must be a positive integer/],
  [['--sft-steps', '1.5'], /--sft-steps must be a positive integer/],
  [['--algos', 'grpo,dpo'], /unknown algorithm dpo/],
  [['--train-threads', '0'], /--train-threads must be a positive integer, got 0/],
  [['--train-threads', 'two'], /--train-threads must be a positive integer, got two/],
  [['--train-hops', '4'], /--train-hops must be 2 or 3, got 4/],
  [
    ['--eval-episodes', 'every'],
    /--eval-episodes must be "all" or two positive integers TEST,OOD \(e\.g\. 150,75\), got every/,
  ],
  [['--eval-episodes', '150'], /--eval-episodes must be .* got 150$/m],
  [['--eval-episodes', '1.5,75'], /--eval-episodes must be .* got 1\.5,75$/m],
  [['--select', 'best'], /--select must be final or best-dev, got best/],
  [['--select', 'best-dev', '--rl', '{"evalEvery":0}'], /--select best-dev needs dev evals/],
];
for (const [args, message] of bad) {
  test(`paper-table ${args.join(' ')} is refused with a clear error`, (t) => {
    t.throws(() => parsePaperTableArgs(args), { message });
  });
}

const defaults = () => {
  const { budget, scenarioOptions } = parsePaperTableArgs([]);
  return { budget, scenarioOptions };
};

test('paper-table --merge refuses runs made with different budgets', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'paper-merge-'));
  const run = (name: string, steps: number) => {
    mkdirSync(join(dir, name));
    const budget = { rl: { steps }, warmStart: { steps: 1320 } };
    writeFileSync(join(dir, name, 'results.json'), JSON.stringify({ budget, results: [] }));
    return join(dir, name);
  };
  await t.throwsAsync(mergeRuns([run('a', 14), run('b', 28)], defaults()), {
    message: /b was run with a different budget than .*a; not merging/,
  });
});

test.serial(
  'paper-table --merge: a run from before --select evaluated the final policy, so it merges with --select final only',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'paper-merge-'));
    const run = (name: string, select?: string) => {
      mkdirSync(join(dir, name));
      const budget = {
        rl: { steps: 14, tasksPerStep: 8, group: 8, lr: 3e-4, minibatch: 64 },
        warmStart: { steps: 1320, episodes: 800 },
        evalEpisodes: { test: 150, ood: 75 },
        ...(select ? { select } : {}),
      };
      writeFileSync(
        join(dir, name, 'results.json'),
        JSON.stringify({ budget, scenarioOptions: { trainHops: '3' }, results: [] }),
      );
      return join(dir, name);
    };
    const old = run('old');
    const ok = bench(['--merge', `${old},${run('final', 'final')}`, '--out', join(dir, 'out')]);
    t.is(ok.code, 0, ok.stderr.slice(-1000));
    t.regex(ok.stdout, /\| method \|/);
    await t.throwsAsync(mergeRuns([old, run('best', 'best-dev')], defaults()), {
      message: /best was run with a different budget than .*old; not merging/,
    });
  },
);

test('paper-table --merge refuses runs made with different scenario options (runs without them trained on 2 hops)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'paper-merge-'));
  const run = (name: string, scenarioOptions?: object) => {
    mkdirSync(join(dir, name));
    const budget = { rl: { steps: 14 }, warmStart: { steps: 1320 } };
    writeFileSync(join(dir, name, 'results.json'), JSON.stringify({ budget, scenarioOptions, results: [] }));
    return join(dir, name);
  };
  const runs = [run('old'), run('new', { noisyEarly: '0.7', noisyDistractor: '0', trainHops: '3' })];
  await t.throwsAsync(mergeRuns(runs, defaults()), {
    message: /new was run with other scenario options \(.*"trainHops":"3".*\) than .*old; not merging/,
  });
});
