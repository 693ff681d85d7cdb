#!/usr/bin/env node
// The CLI. It runs the compiled JavaScript in dist/ (npm install builds it; so does npm run build).
// From the TypeScript sources, with no build: node --import=tsx --conditions=source bin/agent-r1.js
// (npm run dev --): the package's '#cli' import resolves to src/cli/main.ts under that condition.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isCheckout, staleSources } from './stale-sources.js';

const main = import.meta.resolve('#cli');
if (main.startsWith('file:') && main.endsWith('.js')) {
  const file = fileURLToPath(main);
  if (!existsSync(file)) {
    console.error(`agent-r1: ${file} is missing: run npm run build (npm install builds it too)`);
    process.exit(1);
  }
  // In a checkout, say when the sources changed after the build (an installed package cannot be rebuilt).
  const newer = isCheckout() ? staleSources(file) : [];
  if (newer.length > 0) {
    console.error(
      `agent-r1: warning: ${newer[0]}${newer.length > 1 ? ` and ${newer.length - 1} more` : ''} changed ` +
        'after the build in dist/: npm run build, or npm run dev -- … to run the sources',
    );
  }
}
await import(main);
