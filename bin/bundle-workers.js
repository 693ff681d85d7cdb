// The last step of `npm run build`: bundles the compiled worker entry (dist/workers/entry.js) and what
// it imports, zod and xstate included, into dist/workers/bundle/. A worker thread then loads a few
// files instead of a few hundred modules, and starts in about half the time (zod 4 alone is ~100
// ES modules). Scenario folders outside the package are played by the unbundled entry, so that they
// share one copy of the library and of zod with their own imports (see src/rollout/worker-entry.ts).
// Only the pure-JavaScript libraries every rollout thread loads are inlined; every other package (native,
// optional, or needed by some tasks only: tfjs, tsx for a TypeScript scenario) stays an import.
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const INLINED = new Set(['zod', 'xstate', 'lru-cache', 'pure-rand', 'minisearch']);

/** The packages a bundle leaves as imports (each with its subpaths): all but the inlined ones. */
export function externalPackages() {
  const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));
  return Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.devDependencies })
    .filter((name) => !INLINED.has(name))
    .flatMap((name) => [name, `${name}/*`]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outdir = `${root}dist/workers/bundle`;
  rmSync(outdir, { recursive: true, force: true });
  await build({
    entryPoints: [`${root}dist/workers/entry.js`],
    outdir,
    bundle: true,
    // Tasks import their modules on first use (rollout, train, each scenario): each stays a chunk.
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    minifyWhitespace: true,
    minifySyntax: true,
    external: externalPackages(),
    logLevel: 'warning',
  });
}
