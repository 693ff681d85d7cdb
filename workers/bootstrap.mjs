// Piscina loads this plain-JS entry; it registers the TypeScript loader in the worker thread before
// importing the real worker, so workers run the .ts sources whatever the parent was started with.
// Each task kind is a named export (Piscina's `name` option), imported on first use: a rollout
// worker never loads tfjs, an evaluation worker never loads the episode machinery it does not need.
import { register } from 'tsx/esm/api';

register();

export default async function rollout(task) {
  return (await import('./rollout.ts')).default(task);
}

export async function evaluate(task) {
  return (await import('./evaluate.ts')).default(task);
}
