/**
 * The file every Piscina worker thread loads; tasks pick their kind by export name. Compiled code
 * (dist/) starts its workers on compiled JavaScript, with no loader: a thread starts in
 * milliseconds. Running from the TypeScript sources, workers/bootstrap.mjs registers tsx first.
 */
export function workerEntryUrl(from: string = import.meta.url): string {
  const sources = from.endsWith('.ts');
  return new URL(sources ? '../../workers/bootstrap.mjs' : '../../workers/entry.js', from).href;
}
