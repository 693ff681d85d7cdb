// `npm run test:slow`: the slow end-to-end checks, test/**/*.slow.test.ts (each beside the fast test
// file of its feature). The rest of the set-up is package.json's "ava" (which `npm test` uses and
// which excludes these files). CI runs both.
import { readFileSync } from 'node:fs';

const { ava } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));

export default {
  ...ava,
  files: ['test/**/*.slow.test.ts'],
  // Each slow test sets its own t.timeout (at least twice its time on a busy machine); this one only
  // catches a run where nothing at all finishes.
  timeout: '20m',
};
