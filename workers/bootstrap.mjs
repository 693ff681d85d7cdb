// Piscina loads this plain-JS entry; it registers the TypeScript loader in the worker thread before
// importing the real worker, so workers run the .ts sources whatever the parent was started with.
import { register } from 'tsx/esm/api';

register();

export default async function rollout(task) {
  return (await import('./rollout.ts')).default(task);
}
