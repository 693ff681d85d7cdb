import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { staleSources } from '../../bin/stale-sources.js';
import { workerEntryUrl } from '../../src/rollout/worker-entry.ts';
import { cliArgs, repoRoot, SOURCE_ARGS } from '../helpers/cli.ts';

// The compiled package (dist/, which npm install and npm test build): the bin, the workers and the
// exports run as plain JavaScript, with no TypeScript loader, and agree with the sources.

const guard = pathToFileURL(join(repoRoot, 'test/fixtures/load-guard.mjs')).href;
const BUILT = existsSync(join(repoRoot, 'dist/src/cli/main.js'));
const NOT_BUILT = 'dist/ is missing or incomplete: run npm run build (npm test and npm install run it)';
const exportsMap = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).exports as Record<string, unknown>;
const SUBPATHS = Object.keys(exportsMap)
  .filter((k) => k !== './package.json')
  .map((k) => `agent-r1-ts${k.slice(1)}`);
/** What the root must not load: it is loaded by every worker thread, through the scenarios. */
const HEAVY = [
  '@tensorflow/tfjs',
  '@tensorflow/tfjs-core',
  '@tensorflow/tfjs-backend-wasm',
  '@tensorflow/tfjs-node',
  '@tensorflow/tfjs-node-gpu',
  'better-sqlite3',
  'vega',
  'vega-lite',
  'openai',
  'hyparquet-writer',
  'playwright-core',
  'ajv',
  'minisearch',
  'commander',
  'cli-progress',
  'bullmq',
  'ioredis',
];

/** Runs node in the repository; `guarded` makes loading those fail in every thread (LOAD_GUARD). */
function node(args: string[], guarded: string[] = []) {
  const preload = guarded.length ? `--import=${guard}` : '';
  const env = { ...process.env, NODE_OPTIONS: preload, LOAD_GUARD: guarded.join(',') };
  const r = spawnSync(process.execPath, args, { cwd: repoRoot, encoding: 'utf8', timeout: 120_000, env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const listExports = (specifiers: string[]) => [
  '--input-type=module',
  '-e',
  `const out = {};
   for (const s of ${JSON.stringify(specifiers)}) out[s] = Object.keys(await import(s)).sort();
   console.log(JSON.stringify(out));`,
];

test('the worker entry: compiled JavaScript from dist/, the tsx bootstrap only from the sources', (t) => {
  t.is(workerEntryUrl('file:///p/dist/src/rollout/worker-entry.js'), 'file:///p/dist/workers/entry.js');
  t.is(workerEntryUrl('file:///p/src/rollout/worker-entry.ts'), 'file:///p/workers/bootstrap.mjs');
  t.true(workerEntryUrl().endsWith('/workers/bootstrap.mjs'));
});

test('the root export loads no model, database, chart or CLI library (sources)', (t) => {
  const r = node([...SOURCE_ARGS, ...listExports(['agent-r1-ts'])], HEAVY);
  t.is(r.code, 0, r.stderr);
});

test('dist/: agent-r1 --help runs the compiled CLI with no TypeScript loader', (t) => {
  t.true(BUILT, NOT_BUILT);
  const r = node(['bin/agent-r1.js', '--help'], ['ts']);
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /Usage: agent-r1/);
});

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

test("dist/: a user's TypeScript scenario loads through tsx, registered on need; without tsx, a clear error", (t) => {
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
    t.regex(noTsx.stderr, /index\.ts is TypeScript, and loading it needs tsx: npm install --save-dev tsx/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a build older than a source is stale (the CLI warns; npm test rebuilds); a newer one is not', (t) => {
  const stamp = join(mkdtempSync(join(tmpdir(), 'stale-')), 'main.js');
  writeFileSync(stamp, '');
  utimesSync(stamp, new Date(0), new Date(0));
  const stale = staleSources(stamp);
  t.true(stale.includes('src/index.ts') && stale.includes('machines/episode.ts'), stale.slice(0, 5).join(', '));
  const future = new Date(Date.now() + 3_600_000);
  utimesSync(stamp, future, future);
  t.deepEqual(staleSources(stamp), []);
});
