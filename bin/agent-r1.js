#!/usr/bin/env node
// The CLI. It runs the compiled JavaScript in dist/ (npm install builds it; so does npm run build).
// From the TypeScript sources, with no build: node --import=tsx --conditions=source bin/agent-r1.js
// (npm run dev --): the package's '#cli' import resolves to src/cli/main.ts under that condition.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = import.meta.resolve('#cli');
if (main.startsWith('file:') && !existsSync(fileURLToPath(main))) {
  console.error(`agent-r1: ${fileURLToPath(main)} is missing: run npm run build (npm install builds it too)`);
  process.exit(1);
}
await import(main);
