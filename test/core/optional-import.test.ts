import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { AgentR1Error } from '../../src/core/errors.ts';
import { importOptional, MissingOptionalDependencyError } from '../../src/core/optional-import.ts';
import { repoRoot, SOURCE_ARGS } from '../helpers/cli.ts';
import { BUILT, listExports, node, NOT_BUILT, SUBPATHS } from '../helpers/node-run.ts';

// Install weight (issue 63, item 12): what one scenario, backend or command uses is an optional
// dependency, loaded where it is used; one that is not installed is a one-line error naming it, what
// needs it and the install command, and nothing else stops loading.

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  dependencies: { [name: string]: string };
  optionalDependencies: { [name: string]: string };
};
const OPTIONAL = Object.keys(pkg.optionalDependencies);
const NOWHERE = 'agent-r1-no-such-package';

test('a package that is not installed: the error names it, what needs it and how to install it', async (t) => {
  const err = await t.throwsAsync(
    importOptional(NOWHERE, 'the test command', () => import(NOWHERE)),
    {
      instanceOf: MissingOptionalDependencyError,
    },
  );
  t.true(err instanceof AgentR1Error, 'the CLI prints it as one line, exit 1');
  t.is(err.packageName, NOWHERE);
  t.is(err.neededBy, 'the test command');
  t.is(err.installCommand, `npm i ${NOWHERE}`);
  t.is(err.message, `the test command needs the optional package ${NOWHERE}: npm i ${NOWHERE}`);
  t.is((err.cause as NodeJS.ErrnoException).code, 'ERR_MODULE_NOT_FOUND');
  // The same from require() and require.resolve() (CommonJS packages, a server's entry script).
  const require = createRequire(import.meta.url);
  for (const load of [() => require(NOWHERE), () => require.resolve(`${NOWHERE}/dist/index.js`)]) {
    const sync = t.throws(() => importOptional(NOWHERE, 'the test command', load), {
      instanceOf: MissingOptionalDependencyError,
    });
    t.is(sync.message, err.message);
  }
});

test('the install command gives the version range agent-r1-ts asks for', (t) => {
  t.is(
    new MissingOptionalDependencyError('vega-lite', 'x').installCommand,
    `npm i vega-lite@${pkg.optionalDependencies['vega-lite']}`,
  );
  t.is(
    new MissingOptionalDependencyError('bullmq', 'the job queue').message,
    `the job queue needs the optional package bullmq: npm i "bullmq@${pkg.optionalDependencies.bullmq}"`,
  );
});

test('an installed package loads; any other failure is passed on as it is', async (t) => {
  t.is(typeof (await importOptional('zod', 'x', () => import('zod'))).z.object, 'function');
  const broken = new Error('the package threw while loading');
  t.is(
    t.throws(() =>
      importOptional('zod', 'x', () => {
        throw broken;
      }),
    ),
    broken,
  );
  // Another package missing (one the optional package itself imports): not this one's message.
  const other = await t.throwsAsync(
    importOptional('zod', 'x', () => import(NOWHERE)),
    { any: true },
  );
  t.false(other instanceof MissingOptionalDependencyError);
});

/** Every package the sources load through importOptional (named in the call, or as its file's PACKAGE). */
function namedInSources(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) {
        const text = readFileSync(path, 'utf8');
        if (!text.includes('importOptional(')) continue;
        for (const m of text.matchAll(/importOptional\(\s*'([^']+)'|const PACKAGE = '([^']+)'/g))
          names.add(m[1] ?? m[2]!);
      }
    }
  };
  walk(join(repoRoot, 'src'));
  walk(join(repoRoot, 'scenarios'));
  return names;
}

test('what is loaded as optional is an optional dependency, and only that', (t) => {
  const named = namedInSources();
  t.true(named.size >= 9, [...named].join(', '));
  for (const name of named) {
    t.truthy(pkg.optionalDependencies[name], `${name} is in optionalDependencies`);
    t.falsy(pkg.dependencies[name], `${name} is not also a dependency`);
  }
});

test('every entry point and the CLI (help loads every command) load with no optional package (dist)', (t) => {
  t.true(BUILT, NOT_BUILT);
  const entries = node(listExports(SUBPATHS), ['ts', ...OPTIONAL]);
  t.is(entries.code, 0, entries.stderr);
  const help = node(['bin/agent-r1.js', '--help'], ['ts', ...OPTIONAL]);
  t.is(help.code, 0, help.stderr);
  t.regex(help.stdout, /Usage: agent-r1/);
});

test('the root and the gateway load with no optional package (sources)', (t) => {
  const r = node([...SOURCE_ARGS, ...listExports(['agent-r1-ts', 'agent-r1-ts/gateway'])], OPTIONAL);
  t.is(r.code, 0, r.stderr);
});

const missing = (...names: string[]) => names.map((n) => `missing:${n}`);
const oneLine = (stderr: string) => stderr.trimEnd().split('\n');

test.serial('the CLI with an optional package missing: one line naming it and the command, exit 1', (t) => {
  t.true(BUILT, NOT_BUILT);
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-optional-'));
  try {
    const made = node([
      ...['bin/agent-r1.js', 'rollout', '--scenario', 'calculator', '--policy', 'expert'],
      ...['--episodes', '1', '--workers', '0', '--out', join(dir, 'run')],
    ]);
    t.is(made.code, 0, made.stderr);
    const range = (name: string) => pkg.optionalDependencies[name]!;

    const parquet = join(dir, 'out.parquet');
    const exported = node(
      ['bin/agent-r1.js', 'export', join(dir, 'run'), '--format', 'parquet', '--out', parquet],
      missing('hyparquet-writer'),
    );
    t.is(exported.code, 1);
    t.deepEqual(oneLine(exported.stderr), [
      `error: the parquet export (agent-r1 export --format parquet) needs the optional package hyparquet-writer: npm i "hyparquet-writer@${range('hyparquet-writer')}"`,
    ]);
    t.throws(() => statSync(parquet), undefined, 'nothing written');

    const worker = node(['bin/agent-r1.js', 'worker', '--queue', 'redis://127.0.0.1:9'], missing('bullmq', 'ioredis'));
    t.is(worker.code, 1);
    t.deepEqual(oneLine(worker.stderr), [
      `error: the job queue (agent-r1 worker, --queue) needs the optional package bullmq: npm i "bullmq@${range('bullmq')}"`,
    ]);

    const desk = node(
      ['bin/agent-r1.js', 'rollout', '--scenario', 'support-desk', '--policy', 'expert', '--episodes', '1'],
      missing('better-sqlite3'),
    );
    t.is(desk.code, 1);
    t.deepEqual(oneLine(desk.stderr), [
      `error: the support-desk scenario needs the optional package better-sqlite3: npm i "better-sqlite3@${range('better-sqlite3')}"`,
    ]);

    const view = node(['bin/agent-r1.js', 'view', join(dir, 'run'), '--port', '0'], missing('vega'));
    t.is(view.code, 1);
    t.deepEqual(oneLine(view.stderr), [
      `error: chart rendering (agent-r1 view, agent-r1 report) needs the optional package vega: npm i "vega@${range('vega')}"`,
    ]);

    // The list of scenarios still lists them all, saying which cannot load and why.
    const listed = node(['bin/agent-r1.js', 'scenarios'], missing('better-sqlite3'));
    t.is(listed.code, 0, listed.stderr);
    t.regex(
      listed.stdout,
      /support-desk\n {2}\(not installed\) the support-desk scenario needs the optional package better-sqlite3/,
    );
    t.regex(listed.stdout, /calculator \(v/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
