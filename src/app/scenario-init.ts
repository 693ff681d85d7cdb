import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../core/errors.ts';

/**
 * `agent-r1 scenario init DIR`: a ready project for a scenario author, outside this repository —
 * package.json (an ES module package depending on agent-r1-ts, xstate and zod), tsconfig.json, a
 * scenario from a template (scenarios/templates/), a test and a README — so that
 * `cd DIR && npm install && npx agent-r1 scenario check .` works.
 */

export const TEMPLATES = ['minimal', 'world-machine', 'mcp', 'user-sim'] as const;
export type Template = (typeof TEMPLATES)[number];

export interface InitOptions {
  template?: Template;
  /**
   * How the project depends on agent-r1-ts: a path to a checkout or an `npm pack` tarball (written as
   * `file:` + its absolute path), or any npm spec (`^0.1.0`). Default: this package's own folder when
   * it is a checkout, else its version from the registry.
   */
  dependency?: string;
}

export interface InitResult {
  dir: string;
  name: string;
  template: Template;
  /** The agent-r1-ts dependency written to package.json. */
  dependency: string;
  /** The files written, relative to dir. */
  files: string[];
}

/** A folder that scenario init cannot write a project into. */
export class InitTargetError extends UsageError {}

interface PackageJson {
  name: string;
  version: string;
  dependencies?: { [name: string]: string };
  devDependencies?: { [name: string]: string };
}

/** This package's root: the nearest folder above this file with agent-r1-ts's package.json (sources or dist/). */
export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  for (let dir = dirname(from); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file) && (JSON.parse(readFileSync(file, 'utf8')) as PackageJson).name === 'agent-r1-ts') return dir;
  }
  throw new Error(`no agent-r1-ts package.json above ${from}`);
}

/** The dependency spec for agent-r1-ts: a path becomes `file:` + its absolute path; a spec stays as given. */
export function dependencySpec(given: string | undefined, root: string, version: string): string {
  if (given === undefined) {
    // Installed from a registry (inside some node_modules): the same version; else a checkout, by path.
    return root.split(sep).includes('node_modules') ? `^${version}` : `file:${root}`;
  }
  const path = given.startsWith('file:') ? given.slice(5) : given;
  if (existsSync(resolve(path))) return `file:${resolve(path)}`;
  if (given.startsWith('file:')) throw new InitTargetError(`--package ${given}: no such file or folder`);
  return given.startsWith('agent-r1-ts@') ? given.slice('agent-r1-ts@'.length) : given;
}

/** An npm package name from a folder name. */
export function projectName(dir: string): string {
  const name = basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[._-]+|-+$/g, '');
  return name === '' ? 'my-scenario' : name.slice(0, 214);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => statSync(join(dir, f)).isFile())
    .sort();
}

export function initScenarioProject(target: string, options: InitOptions = {}): InitResult {
  const template = options.template ?? 'world-machine';
  if (!(TEMPLATES as readonly string[]).includes(template))
    throw new InitTargetError(`unknown template "${template}"; valid: ${TEMPLATES.join(', ')}`);
  const dir = resolve(target);
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0))
    throw new InitTargetError(`${dir} exists and is not an empty folder: scenario init writes a new project`);
  const root = packageRoot();
  const own = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as PackageJson;
  const dependency = dependencySpec(options.dependency, root, own.version);
  const name = projectName(dir);
  const source = join(root, 'scenarios', 'templates', template);
  const range = (pkg: string, fallback: string) => own.dependencies?.[pkg] ?? own.devDependencies?.[pkg] ?? fallback;

  mkdirSync(dir, { recursive: true });
  cpSync(source, dir, { recursive: true, filter: (from) => basename(from) !== 'README.md' });
  const packageJson = {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    description: `A scenario for agent-r1-ts (from the ${template} template).`,
    engines: { node: '>=20' },
    scripts: {
      check: 'agent-r1 scenario check .',
      test: 'node --import tsx --test test/scenario.test.ts',
      typecheck: 'tsc --noEmit',
    },
    dependencies: {
      'agent-r1-ts': dependency,
      xstate: range('xstate', '^5.0.0'),
      zod: range('zod', '^4.0.0'),
      // The mcp template's tools come from this server (npm brings it; nothing is fetched at run time).
      ...(template === 'mcp'
        ? { '@modelcontextprotocol/server-memory': range('@modelcontextprotocol/server-memory', '^2026.8.31') }
        : {}),
    },
    devDependencies: {
      '@types/node': range('@types/node', '^20.0.0'),
      tsx: range('tsx', '^4.0.0'),
      typescript: range('typescript', '^5.0.0'),
    },
  };
  const tsconfig = {
    compilerOptions: {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      strict: true,
      noEmit: true,
      allowImportingTsExtensions: true,
      isolatedModules: true,
      skipLibCheck: true,
      types: ['node'],
      lib: ['ES2022'],
    },
    exclude: ['node_modules', 'runs'],
  };
  const readme = readFileSync(join(source, 'README.md'), 'utf8')
    .replaceAll('{{name}}', name)
    .replaceAll('{{dependency}}', dependency);
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
  writeFileSync(join(dir, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`);
  writeFileSync(join(dir, 'README.md'), readme);
  writeFileSync(join(dir, '.gitignore'), 'node_modules/\nruns/\n');
  return {
    dir,
    name,
    template,
    dependency,
    files: filesUnder(dir).map((f) => relative(dir, join(dir, f))),
  };
}
