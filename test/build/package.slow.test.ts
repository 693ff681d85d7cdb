import test from 'ava';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliArgs, SOURCE_ARGS } from '../helpers/cli.ts';
import { BUILT, HEAVY, listExports, node, NOT_BUILT, SUBPATHS } from '../helpers/node-run.ts';

// The compiled package end to end (slow: each check starts several node processes that load
// everything): every export, a rollout on worker threads and a user's TypeScript scenario run as
// plain JavaScript and agree with the sources.

test('dist/: every export loads with no TypeScript loader, names what the sources name; the root stays light', (t) => {
  t.true(BUILT, NOT_BUILT);
  const built = node(listExports(SUBPATHS), ['ts']);
  t.is(built.code, 0, built.stderr);
  const sources = node([...SOURCE_ARGS, ...listExports(SUBPATHS)]);
  t.is(sources.code, 0, sources.stderr);
  t.deepEqual(JSON.parse(built.stdout), JSON.parse(sources.stdout), `dist/ is stale: run npm run build`);
  const root = node(listExports(['agent-r1-ts']), ['ts', ...HEAVY]);
  t.is(root.code, 0, root.stderr);
});

test('dist/: a rollout on 2 worker threads runs with no TypeScript loader, and writes what the sources write', (t) => {
  t.true(BUILT, NOT_BUILT);
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-build-'));
  try {
    const args = ['rollout', '--scenario', 'calculator', '--policy', 'expert', '--episodes', '8', '--workers', '2'];
    const built = node(['bin/agent-r1.js', ...args, '--out', join(dir, 'dist')], ['ts']);
    t.is(built.code, 0, built.stderr);
    const sources = node(cliArgs([...args, '--out', join(dir, 'src')]));
    t.is(sources.code, 0, sources.stderr);
    const records = (which: string) => readFileSync(join(dir, which, 'episodes.jsonl'), 'utf8');
    t.is(records('dist').trim().split('\n').length, 8);
    t.is(records('dist'), records('src'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("dist/: a user's TypeScript scenario loads through the package's tsx, registered on need; tsx unloadable, a clear error", (t) => {
  t.true(BUILT, NOT_BUILT);
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-build-'));
  try {
    const scenario = 'docs/examples/tiny-desk';
    const args = ['rollout', '--scenario', scenario, '--policy', 'expert', '--episodes', '4', '--workers', '2'];
    const ok = node(['bin/agent-r1.js', ...args, '--out', join(dir, 'a')]);
    t.is(ok.code, 0, ok.stderr);
    t.is(
      readFileSync(join(dir, 'a', 'episodes.jsonl'), 'utf8')
        .trim()
        .split('\n').length,
      4,
    );
    t.notRegex(ok.stderr, /loaded twice/);
    const noTsx = node(['bin/agent-r1.js', ...args, '--out', join(dir, 'b')], ['tsx']);
    t.not(noTsx.code, 0);
    t.regex(
      noTsx.stderr,
      /index\.ts needs a TypeScript loader, and tsx \(a dependency of agent-r1-ts\) cannot be loaded: reinstall agent-r1-ts/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
