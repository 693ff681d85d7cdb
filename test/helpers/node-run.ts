import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot } from './cli.ts';

// Running node on the repository as a user would: on the compiled package (dist/) or the sources,
// with some packages made unloadable (the load guard) to show what a module really needs.

const guard = pathToFileURL(join(repoRoot, 'test/fixtures/load-guard.mjs')).href;
export const BUILT = existsSync(join(repoRoot, 'dist/src/cli/main.js'));
export const NOT_BUILT = 'dist/ is missing or incomplete: run npm run build (npm test and npm install run it)';
const exportsMap = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')).exports as Record<string, unknown>;
export const SUBPATHS = Object.keys(exportsMap)
  .filter((k) => k !== './package.json')
  .map((k) => `agent-r1-ts${k.slice(1)}`);
/** What the root must not load: it is loaded by every worker thread, through the scenarios. */
export const HEAVY = [
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
export function node(args: string[], guarded: string[] = []) {
  const preload = guarded.length ? `--import=${guard}` : '';
  const env = { ...process.env, NODE_OPTIONS: preload, LOAD_GUARD: guarded.join(',') };
  const r = spawnSync(process.execPath, args, { cwd: repoRoot, encoding: 'utf8', timeout: 120_000, env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export const listExports = (specifiers: string[]) => [
  '--input-type=module',
  '-e',
  `const out = {};
   for (const s of ${JSON.stringify(specifiers)}) out[s] = Object.keys(await import(s)).sort();
   console.log(JSON.stringify(out));`,
];
