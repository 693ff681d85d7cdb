#!/usr/bin/env node
// The CLI. It runs the compiled JavaScript in dist/ (npm install builds it; so does npm run build).
// From the TypeScript sources, with no build: node --import=tsx --conditions=source bin/agent-r1.js
// (npm run dev --): the package's '#cli' import resolves to src/cli/main.ts under that condition.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = import.meta.resolve('#cli');
if (main.startsWith('file:') && main.endsWith('.js')) {
  const file = fileURLToPath(main);
  if (!existsSync(file)) {
    console.error(`agent-r1: ${file} is missing: run npm run build (npm install builds it too)`);
    process.exit(1);
  }
  // In a checkout, say when the sources changed after the build (an installed package has no sources).
  const root = fileURLToPath(new URL('..', import.meta.url));
  const built = statSync(file).mtimeMs;
  const newer = ['src', 'machines', 'workers', 'scenarios'].flatMap((dir) =>
    existsSync(root + dir)
      ? readdirSync(root + dir, { recursive: true, encoding: 'utf8' })
          .filter((f) => f.endsWith('.ts') && statSync(`${root}${dir}/${f}`).mtimeMs > built)
          .map((f) => `${dir}/${f}`)
      : [],
  );
  if (newer.length > 0) {
    console.error(
      `agent-r1: warning: ${newer[0]}${newer.length > 1 ? ` and ${newer.length - 1} more` : ''} changed ` +
        'after the build in dist/: npm run build, or npm run dev -- … to run the sources',
    );
  }
}
await import(main);
