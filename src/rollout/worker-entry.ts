/**
 * The file every Piscina worker thread loads; tasks pick their kind by export name. Compiled code
 * (dist/) starts its workers on the bundle (dist/workers/bundle/entry.js, made by
 * bin/bundle-workers.js): a thread loads a few files instead of hundreds of modules. A scenario
 * folder of the user's is played on the unbundled entry (dist/workers/entry.js), so that the folder's
 * own imports of 'agent-r1-ts' and 'zod' and the worker's are one copy (classes, zod schemas).
 * Running from the TypeScript sources, workers/bootstrap.mjs registers tsx first.
 */
export function workerEntryUrl(options: { userScenario?: boolean } = {}, from: string = import.meta.url): string {
  if (from.endsWith('.ts')) return new URL('../../workers/bootstrap.mjs', from).href;
  return new URL(options.userScenario ? '../../workers/entry.js' : '../../workers/bundle/entry.js', from).href;
}
