// Which TypeScript sources changed after the build in dist/: the CLI warns about them, and `npm test`
// (`node bin/stale-sources.js --build`) rebuilds dist/ only then, since npm install has just built it.
// An installed package is not a checkout: its user cannot build it, so the CLI does not look there.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_DIRS = ['src', 'machines', 'workers', 'scenarios'];
// The build's last output: a build that stopped half-way is stale.
const BUILT = `${root}dist/workers/bundle/entry.js`;

/**
 * Whether `dir` (the package's root) is a checkout, where changed sources mean a build is due: it has
 * a .git (a folder, or a worktree's file), or it is not inside a node_modules folder. An installed
 * package ships scenarios/templates/*.ts, whose times say nothing about its dist/.
 */
export function isCheckout(dir = root) {
  return existsSync(join(dir, '.git')) || !dir.split(sep).includes('node_modules');
}

/** The sources (and tsconfig files) newer than `built`, as paths from the repository root. */
export function staleSources(built = BUILT) {
  const builtAt = statSync(built).mtimeMs;
  const newer = (path) => statSync(`${root}${path}`).mtimeMs > builtAt;
  const sources = SOURCE_DIRS.flatMap((dir) =>
    existsSync(root + dir)
      ? readdirSync(root + dir, { recursive: true, encoding: 'utf8' })
          .filter((f) => f.endsWith('.ts'))
          .map((f) => `${dir}/${f}`)
      : [],
  );
  const configs = ['tsconfig.json', 'tsconfig.build.json'].filter((f) => existsSync(root + f));
  return [...sources, ...configs].filter(newer);
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--build') {
  const stale = existsSync(BUILT) ? staleSources() : ['dist/ (missing)'];
  if (stale.length > 0) {
    process.stderr.write(
      `building dist/: ${stale[0]}${stale.length > 1 ? ` and ${stale.length - 1} more` : ''} changed\n`,
    );
    execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
  }
}
