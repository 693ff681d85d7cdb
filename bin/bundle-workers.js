// The last step of `npm run build`: bundles the compiled worker entry (dist/workers/entry.js) and what
// it imports, zod and xstate included, into dist/workers/bundle/. A worker thread then loads a few
// files instead of a few hundred modules, and starts in about half the time (zod 4 alone is ~100
// ES modules). Scenario folders outside the package are played by the unbundled entry, so that they
// share one copy of the library and of zod with their own imports (see src/rollout/worker-entry.ts).
// Native and optional packages (tfjs, webgpu) stay external: a thread loads them only if a task needs them.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
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
  external: ['@tensorflow/*', 'webgpu', 'better-sqlite3', 'bullmq', 'ioredis'],
  // A bundled CommonJS dependency may call require(): give the ES module one.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
