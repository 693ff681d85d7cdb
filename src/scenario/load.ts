import { existsSync, statSync } from 'node:fs';
import { isAbsolute, resolve, sep } from 'node:path';
import type { EpisodeRecord } from '../core/types.ts';
import { ScenarioError, ScenarioOptionsError } from '../core/errors.ts';
import { ScenarioFolderMissingError, UnknownScenarioError } from './errors.ts';
import type { Scenario, ScenarioDefinition } from './scenario.ts';
import { importUserModule, scenarioEntry } from './user-module.ts';

export type ScenarioRegistry = { [name: string]: () => Promise<{ default: ScenarioDefinition }> };

/** Builds a scenario from its module's default export and the given options. */
export async function instantiateScenario(
  definition: ScenarioDefinition,
  options: { [key: string]: string },
): Promise<Scenario> {
  let scenario: Scenario;
  // A scenario that is a plain object has no options: one given would be silently ignored.
  const given = Object.keys(options);
  if (typeof definition !== 'function' && given.length > 0 && definition && typeof definition === 'object') {
    throw new ScenarioOptionsError(`scenario ${String(definition.id)} takes no options (got ${given.join(', ')})`);
  }
  try {
    scenario = typeof definition === 'function' ? await definition(options) : definition;
  } catch (err) {
    if (err instanceof ScenarioError) throw err;
    throw new ScenarioOptionsError(err instanceof Error ? err.message : String(err), { cause: err });
  }
  if (!scenario || typeof scenario !== 'object' || typeof scenario.id !== 'string') {
    throw new ScenarioError(
      "the scenario module's default export is not a scenario (an object with an id) or a function returning one",
    );
  }
  // Loud, not ignored: the scenario's own metrics would silently vanish from every summary.
  if ('summarize' in scenario) throw new ScenarioError(`scenario ${scenario.id}: ${SUMMARIZE_REPLACED}`);
  return scenario;
}

/** What a scenario written for the old `summarize(records)` is told. */
export const SUMMARIZE_REPLACED =
  '"summarize(records)" was replaced by "summarizer()", which returns { add(record), result() } ' +
  "(a fold, so a run's records need not all be held): see docs/scenarios.md";

/** Whether a scenario name is meant as a folder: `.`, `..`, or anything with a path separator. */
export function isScenarioPath(name: string): boolean {
  return name === '.' || name === '..' || name.includes('/') || name.includes(sep) || isAbsolute(name);
}

/** A scenario folder's scenario, marked with the folder it came from (records carry it). */
export async function loadScenarioFolder(dir: string, options: { [key: string]: string } = {}): Promise<Scenario> {
  const path = resolve(dir);
  if (!existsSync(path) || !statSync(path).isDirectory()) throw new ScenarioError(`${path} is not a folder`);
  const file = scenarioEntry(path);
  if (!file) throw new ScenarioError(`${path} has no index.ts (or index.js)`);
  const mod = (await importUserModule(file)) as { default?: ScenarioDefinition };
  if (!mod.default) throw new ScenarioError(`${file} has no default export`);
  return withSource(await instantiateScenario(mod.default, options), path);
}

/** The scenario with its folder: a copy, so the module's own object is left as it is. */
export function withSource(scenario: Scenario, source: string): Scenario {
  return scenario.source === source ? scenario : { ...scenario, source };
}

/**
 * A built-in scenario by name, or a user's scenario folder (a path containing index.ts or index.js).
 * Unknown names fail with the list of valid ones and how to pass a folder.
 */
export async function loadScenario(
  name: string,
  registry: ScenarioRegistry,
  options: { [key: string]: string } = {},
): Promise<Scenario> {
  const entry = Object.hasOwn(registry, name) ? registry[name] : undefined;
  if (entry) return instantiateScenario((await entry()).default, options);
  if (isScenarioPath(name) && existsSync(resolve(name))) return loadScenarioFolder(name, options);
  throw new UnknownScenarioError(name, Object.keys(registry));
}

/**
 * The scenario a record was played in: `override` when given (a folder or a built-in name: where a
 * moved folder is now), else the folder the record names, else the built-in scenario of its id.
 */
export async function loadRecordScenario(
  recorded: EpisodeRecord['scenario'],
  registry: ScenarioRegistry,
  override?: string,
): Promise<Scenario> {
  if (override !== undefined) return loadScenario(override, registry, recorded.options);
  if (recorded.source !== undefined) {
    if (!scenarioEntry(recorded.source)) throw new ScenarioFolderMissingError(recorded.id, recorded.source);
    return loadScenarioFolder(recorded.source, recorded.options);
  }
  return loadScenario(recorded.id, registry, recorded.options);
}
