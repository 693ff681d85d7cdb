// Which TypeScript sources changed after the build in dist/: the CLI warns about them, and `npm test`
// (`node bin/stale-sources.js --build`) rebuilds dist/ only then, since npm install has just built it.
// An installed package has no sources: nothing is stale there.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_DIRS = ['src', 'machines', 'workers', 'scenarios'];
// The build's last output: a build that stopped half-way is stale.
const BUILT = `${root}dist/workers/bundle/entry.js`;

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
