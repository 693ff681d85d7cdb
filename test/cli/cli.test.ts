import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { cli } from '../helpers/cli.ts';

test.serial('eval --json prints the summary as the last stdout line', (t) => {
  const r = cli(['eval', '--scenario', 'calculator', '--policy', 'expert', '--episodes', '50', '--json']);
  t.is(r.code, 0, r.stderr);
  const s = r.lastJson();
  t.is(s.episodes, 50);
  t.true(s.successRate >= 0.99);
  t.is(s.failed, 0);
  t.deepEqual(s.byEndReason, { answered: 50 });
  t.is(s.meanTurns, 2);
});

// In-thread (--workers 0): the test above already runs eval on its default worker pool.
test.serial('the random calculator policy mostly fails', (t) => {
  const r = cli([
    'eval',
    '--scenario',
    'calculator',
    '--policy',
    'random',
    '--episodes',
    '50',
    '--workers',
    '0',
    '--json',
  ]);
  t.is(r.code, 0, r.stderr);
  t.true(r.lastJson().successRate < 0.2);
});

const usageErrors: Array<[string, string[], RegExp]> = [
  [
    'an unknown scenario',
    ['eval', '--scenario', 'nope', '--policy', 'expert'],
    /unknown scenario "nope"; valid: calculator/,
  ],
  [
    'an unknown policy',
    ['eval', '--scenario', 'calculator', '--policy', 'nope'],
    /unknown policy "nope"; valid: expert, random, ckpt:DIR/,
  ],
  [
    'an unknown split',
    ['eval', '--scenario', 'calculator', '--policy', 'expert', '--split', 'nope'],
    /unknown split of scenario calculator "nope"; valid: train, dev, test/,
  ],
  [
    'an unknown flag',
    ['eval', '--scenario', 'calculator', '--policy', 'expert', '--bogus'],
    /unknown option '--bogus'[\s\S]*--episodes <n>/,
  ],
  ['a bad number', ['rollout', '--scenario', 'calculator', '--episodes', 'many'], /expected a positive integer/],
  [
    'a seed past exact integers, at parse time',
    ['start', '--seed', '1e99', '--quick'],
    /'--seed <n>' argument '1e99' is invalid\. expected an integer \(at most 9007199254740991 in size\)/,
  ],
  ['an unknown command', ['fly'], /unknown command 'fly'/],
  [
    'a scenario option the scenario rejects',
    ['eval', '--scenario', 'multihop-qa', '--policy', 'expert', '--option', 'size=huge'],
    /multihop-qa options: .*expected one of "tiny"\|"small"\|"medium"\|"large"/,
  ],
  [
    'a dataset scenario without its file',
    ['eval', '--scenario', 'musique', '--policy', 'expert'],
    /option data \(the dataset file, --data PATH\) is required/,
  ],
  [
    'an option that is not key=value',
    ['eval', '--scenario', 'calculator', '--policy', 'expert', '--option', 'nokv'],
    /expected key=value/,
  ],
  [
    'a negative temperature',
    ['eval', '--scenario', 'calculator', '--policy', 'expert', '--temperature', '-1'],
    /--temperature <x>.*expected a number ≥ 0/,
  ],
  [
    'an unknown tokenizer chunking',
    ['sft', '--scenario', 'calculator', '--out', 'x', '--chunking', 'bytes'],
    /--chunking <name>.*expected one of space-words, words/,
  ],
];

for (const [what, args, pattern] of usageErrors) {
  test.serial(`${what}: a message listing the valid choices, exit 2`, (t) => {
    const r = cli(args);
    t.is(r.code, 2);
    t.regex(r.stderr, pattern);
  });
}

test.serial('scenarios lists calculator with its tools and splits', (t) => {
  const r = cli(['scenarios', '--json']);
  t.is(r.code, 0, r.stderr);
  const calc = r.lastJson().find((s: { name: string }) => s.name === 'calculator');
  t.deepEqual(calc.tools, ['calculate']);
  t.deepEqual(calc.splits, ['train', 'dev', 'test']);
});

test.serial('budget flags override the scenario: --max-turns 1 ends every episode after one turn', (t) => {
  const r = cli([
    'eval',
    '--scenario',
    'calculator',
    '--policy',
    'random',
    '--episodes',
    '30',
    '--max-turns',
    '1',
    '--workers',
    '0',
    '--json',
  ]);
  t.is(r.code, 0, r.stderr);
  const s = r.lastJson();
  t.is(s.meanTurns, 1);
  t.deepEqual(
    Object.keys(s.byEndReason).sort(),
    Object.keys(s.byEndReason)
      .filter((k) => k === 'answered' || k === 'max_turns')
      .sort(),
  );
});

test.serial(
  'a step-level rollout (--context window:2) writes the same bytes on 2 worker threads as on this one, and replays',
  (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'agent-r1-context-'));
    const run = (workers: string) => {
      const out = join(dir, `w${workers}`);
      const args = ['--scenario', 'gridworld', '--policy', 'expert', '--context', 'window:2', '--episodes', '12'];
      const r = cli(['rollout', ...args, '--workers', workers, '--out', out, '--json']);
      t.is(r.code, 0, r.stderr);
      return readFileSync(join(out, 'episodes.jsonl'), 'utf8');
    };
    const here = run('0');
    t.is(run('2'), here);
    const first = JSON.parse(here.split('\n')[0]!);
    t.is(first.config.context, 'window:2');
    t.true(first.turns.some((turn: { context?: unknown }) => turn.context !== undefined));
    const replay = cli(['replay', join(dir, 'w0', 'episodes.jsonl'), '--quiet']);
    t.is(replay.code, 0, replay.stdout + replay.stderr);
    t.regex(replay.stdout, /12 episodes: 12 verified, 0 diverged/);
  },
);
