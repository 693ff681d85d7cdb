// Piscina loads this plain-JS entry; it registers the TypeScript loader in the worker thread before
// importing the real worker, so workers run the .ts sources whatever the parent was started with.
// Each task kind is a named export (Piscina's `name` option), imported on first use: a rollout
// worker never loads tfjs, a replica worker loads it for its copy of the model.
import { register } from 'tsx/esm/api';

register();

export default async function rollout(task) {
  return (await import('./rollout.ts')).default(task);
}

export async function replica(task) {
  return (await import('./replica.ts')).default(task);
}
