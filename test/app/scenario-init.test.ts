import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import {
  dependencySpec,
  initScenarioProject,
  InitTargetError,
  packageRoot,
  projectName,
} from '../../src/app/scenario-init.ts';
import { cli, repoRoot } from '../helpers/cli.ts';

const scratch = mkdtempSync(join(tmpdir(), 'agent-r1-init-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

test('scenario init writes a project: an ES module package on agent-r1-ts, xstate and zod, a scenario, a test', (t) => {
  const made = initScenarioProject(join(scratch, 'My Thermostat'), { template: 'world-machine' });
  t.is(made.name, 'my-thermostat');
  t.deepEqual(made.files, [
    '.gitignore',
    'README.md',
    'env.ts',
    'index.ts',
    'package.json',
    'policies.ts',
    'tasks.ts',
    'test/scenario.test.ts',
    'tools.ts',
    'tsconfig.json',
    'world.ts',
  ]);
  const pkg = JSON.parse(readFileSync(join(made.dir, 'package.json'), 'utf8'));
  t.is(pkg.type, 'module');
  t.is(pkg.dependencies['agent-r1-ts'], `file:${packageRoot()}`, 'a checkout by default');
  t.truthy(pkg.dependencies.xstate);
  t.truthy(pkg.dependencies.zod);
  t.truthy(pkg.devDependencies.tsx, 'the CLI loads a TypeScript scenario through tsx');
  t.is(pkg.scripts.check, 'agent-r1 scenario check .');
  const readme = readFileSync(join(made.dir, 'README.md'), 'utf8');
  t.regex(readme, /^# my-thermostat\n/);
  t.regex(readme, new RegExp(`\`file:${packageRoot()}\``));
  t.notRegex(readme, /\{\{/);
  // The template's sources, as they are in scenarios/templates (checked there by scenario check).
  t.is(
    readFileSync(join(made.dir, 'tools.ts'), 'utf8'),
    readFileSync(join(repoRoot, 'scenarios/templates/world-machine/tools.ts'), 'utf8'),
  );
  const minimal = initScenarioProject(join(scratch, 'crates'), { template: 'minimal' });
  t.deepEqual(minimal.files, [
    '.gitignore',
    'README.md',
    'index.ts',
    'package.json',
    'test/scenario.test.ts',
    'tsconfig.json',
  ]);
  const mcp = initScenarioProject(join(scratch, 'facts'), { template: 'mcp' });
  t.deepEqual(mcp.files, minimal.files);
  const userSim = initScenarioProject(join(scratch, 'router'), { template: 'user-sim' });
  t.deepEqual(userSim.files, minimal.files);
  const mcpPkg = JSON.parse(readFileSync(join(mcp.dir, 'package.json'), 'utf8'));
  t.truthy(mcpPkg.dependencies['@modelcontextprotocol/server-memory'], 'npm install brings the server');
  t.falsy(pkg.dependencies['@modelcontextprotocol/server-memory'], 'only the mcp template depends on it');
});

test('the agent-r1-ts dependency: a path becomes file: and absolute, a version stays, a registry install keeps its version', (t) => {
  const tarball = join(scratch, 'agent-r1-ts-0.1.0.tgz');
  writeFileSync(tarball, '');
  t.is(dependencySpec(tarball, '/x', '0.1.0'), `file:${tarball}`);
  t.is(dependencySpec(`file:${scratch}`, '/x', '0.1.0'), `file:${scratch}`);
  t.is(dependencySpec('^0.2.0', '/x', '0.1.0'), '^0.2.0');
  t.is(dependencySpec('agent-r1-ts@0.3.1', '/x', '0.1.0'), '0.3.1');
  t.is(dependencySpec(undefined, '/work/checkout', '0.1.0'), 'file:/work/checkout');
  t.is(dependencySpec(undefined, '/app/node_modules/agent-r1-ts', '0.1.0'), '^0.1.0');
  t.throws(() => dependencySpec('file:/no/such/agent-r1-ts.tgz', '/x', '0.1.0'), { instanceOf: InitTargetError });
  t.is(projectName('/tmp/Über Scenario!'), 'ber-scenario');
  t.is(projectName('/tmp/...'), 'my-scenario');
});

test.serial('agent-r1 scenario init: a folder that is not empty and an unknown template exit 2', (t) => {
  const full = join(scratch, 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'notes.txt'), 'mine');
  const taken = cli(['scenario', 'init', full]);
  t.is(taken.code, 2);
  t.regex(taken.stderr, /exists and is not an empty folder/);
  t.is(readFileSync(join(full, 'notes.txt'), 'utf8'), 'mine');
  const bad = cli(['scenario', 'init', join(scratch, 'x'), '--template', 'huge']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /Allowed choices are minimal, world-machine/);
  const ok = cli(['scenario', 'init', join(scratch, 'fresh'), '--template', 'minimal', '--json']);
  t.is(ok.code, 0, ok.stderr);
  t.like(ok.lastJson(), { name: 'fresh', template: 'minimal', dependency: `file:${packageRoot()}` });
});
