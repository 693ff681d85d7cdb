import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ScenarioError } from '../core/errors.ts';

/** What a scenario folder's module may be called: its TypeScript source, or that compiled. */
export const SCENARIO_ENTRIES = ['index.ts', 'index.mts', 'index.js', 'index.mjs'] as const;

/** The module file of a user's scenario folder, if it has one. */
export function scenarioEntry(dir: string): string | undefined {
  return SCENARIO_ENTRIES.map((name) => join(dir, name)).find((file) => existsSync(file));
}

let tsLoader: Promise<void> | undefined;

async function registerTsx(file: string): Promise<void> {
  let api: { register: () => unknown };
  try {
    api = await import('tsx/esm/api');
  } catch (err) {
    const how = 'npm install --save-dev tsx (or compile the scenario to index.js)';
    throw new ScenarioError(`${file} is TypeScript, and loading it needs tsx: ${how}`, { cause: err });
  }
  api.register();
}

/**
 * Imports a user's module (a scenario folder's index). Where TypeScript already loads (running from
 * the sources through tsx, a Node that strips types, a loader of the user's) it is a plain import;
 * otherwise a TypeScript file registers tsx, in this thread, on first need: the compiled package
 * runs without a loader, and only a .ts scenario pays for one.
 */
export async function importUserModule(file: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(file).href;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_UNKNOWN_FILE_EXTENSION' || !/\.[cm]?ts$/.test(file)) throw err;
  }
  tsLoader ??= registerTsx(file);
  await tsLoader;
  // A failed import stays failed for its URL: the query makes it a new one.
  return (await import(`${url}?ts`)) as Record<string, unknown>;
}
