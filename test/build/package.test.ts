import test from 'ava';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCheckout, staleSources } from '../../bin/stale-sources.js';
import { workerEntryUrl } from '../../src/rollout/worker-entry.ts';
import { repoRoot, SOURCE_ARGS } from '../helpers/cli.ts';
import { BUILT, HEAVY, listExports, node, NOT_BUILT } from '../helpers/node-run.ts';

// The compiled package (dist/, which npm install and npm test build): the bin and the root export
// run as plain JavaScript, with no TypeScript loader. The slow checks (every export, worker threads,
// a user's TypeScript scenario, each against the sources) are package.slow.test.ts.

test('the worker entry: the bundle from dist/ (a user scenario: the modules), the tsx bootstrap from the sources', (t) => {
  const compiled = 'file:///p/dist/src/rollout/worker-entry.js';
  t.is(workerEntryUrl({}, compiled), 'file:///p/dist/workers/bundle/entry.js');
  t.is(workerEntryUrl({ userScenario: true }, compiled), 'file:///p/dist/workers/entry.js');
  t.is(workerEntryUrl({}, 'file:///p/src/rollout/worker-entry.ts'), 'file:///p/workers/bootstrap.mjs');
  t.true(workerEntryUrl().endsWith('/workers/bootstrap.mjs'));
});

test('dist/: the worker bundle exists and its entry exports both tasks', async (t) => {
  t.true(BUILT, NOT_BUILT);
  const bundle = await import(
    workerEntryUrl({}, new URL('../../dist/src/rollout/worker-entry.js', import.meta.url).href)
  );
  t.is(typeof bundle.default, 'function');
  t.is(typeof bundle.train, 'function');
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

/**
 * The real bin/ scripts in a package laid out at `dir`: a dist/ main that says it ran, built before a
 * source (a scenario template, as the published package ships), so every source is newer than it.
 */
function packageAt(dir: string): string {
  mkdirSync(join(dir, 'bin'), { recursive: true });
  for (const f of ['agent-r1.js', 'stale-sources.js']) copyFileSync(join(repoRoot, 'bin', f), join(dir, 'bin', f));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ type: 'module', imports: { '#cli': { default: './dist/src/cli/main.js' } } }),
  );
  mkdirSync(join(dir, 'dist/src/cli'), { recursive: true });
  const main = join(dir, 'dist/src/cli/main.js');
  writeFileSync(main, "process.stdout.write('main ran\\n');\n");
  utimesSync(main, new Date(0), new Date(0));
  mkdirSync(join(dir, 'scenarios/templates/mcp'), { recursive: true });
  writeFileSync(join(dir, 'scenarios/templates/mcp/index.ts'), 'export {};\n');
  return join(dir, 'bin/agent-r1.js');
}

test('the stale-build warning: a checkout gets it; an installed package (inside node_modules, no .git) never does', (t) => {
  const root = mkdtempSync(join(tmpdir(), 'stale-install-'));
  try {
    const run = (bin: string) => spawnSync(process.execPath, [bin], { encoding: 'utf8' });
    const installed = run(packageAt(join(root, 'project/node_modules/agent-r1-ts')));
    t.is(installed.status, 0, installed.stderr);
    t.is(installed.stdout, 'main ran\n');
    t.is(installed.stderr, '', 'no warning a user could not act on');
    const checkout = run(packageAt(join(root, 'agent-r1-ts')));
    t.is(checkout.stdout, 'main ran\n');
    t.regex(
      checkout.stderr,
      /warning: scenarios\/templates\/mcp\/index\.ts changed after the build in dist\/: npm run build/,
    );
    // A checkout that sits inside node_modules (a git dependency, a clone there) still is one.
    const cloned = join(root, 'project/node_modules/cloned');
    const bin = packageAt(cloned);
    mkdirSync(join(cloned, '.git'));
    t.regex(run(bin).stderr, /warning: scenarios\/templates\/mcp\/index\.ts changed after the build/);
    t.true(isCheckout(repoRoot), 'this repository is one');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
