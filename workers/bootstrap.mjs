// The worker entry when running from the TypeScript sources (tests, `npm run dev`): registers tsx in
// the worker thread, and the 'source' export condition, so that scenarios importing 'agent-r1-ts' by
// name get the sources as the parent did (Piscina starts workers without the parent's execArgv).
// Compiled code uses dist/workers/entry.js instead, with no loader (see src/rollout/worker-entry.ts).
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
const addSource = `export function resolve(specifier, context, next) {
  const conditions = context.conditions.includes('source') ? context.conditions : [...context.conditions, 'source'];
  return next(specifier, { ...context, conditions });
}`;
register(`data:text/javascript,${encodeURIComponent(addSource)}`);

export default async function rollout(task) {
  return (await import('./entry.ts')).default(task);
}

export async function train(task) {
  return (await import('./entry.ts')).train(task);
}

export async function check(task) {
  return (await import('./entry.ts')).check(task);
}
