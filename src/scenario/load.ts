import { existsSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, resolve, sep } from 'node:path';
import { ScenarioError, ScenarioOptionsError, UsageError } from '../core/errors.ts';
import { MissingOptionalDependencyError } from '../core/optional-import.ts';
import { ScenarioFolderMissingError, UnknownScenarioError, UntrustedScenarioError } from './errors.ts';
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
    // A package the scenario needs is not installed: not a problem with its options.
    if (err instanceof ScenarioError || err instanceof MissingOptionalDependencyError) throw err;
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

/** What a record (or a queue job) says about the scenario it was played in. */
export interface RecordedScenario {
  id: string;
  options: { [key: string]: string };
  /** The folder it was loaded from, as the record says (data: never loaded unless the user named it). */
  source?: string;
}

/**
 * A built-in scenario by its id, from the registry only: a record's id is data, so a path-like id
 * ("../x") is an unknown name here, never a folder.
 */
export async function builtinScenario(
  id: string,
  registry: ScenarioRegistry,
  options: { [key: string]: string } = {},
): Promise<Scenario> {
  const entry = Object.hasOwn(registry, id) ? registry[id] : undefined;
  if (!entry) throw new UnknownScenarioError(id, Object.keys(registry));
  return instantiateScenario((await entry()).default, options);
}

/** Whether a folder the user named is the folder a record names (the same path, or the same folder through a link). */
function sameFolder(named: string, recorded: string): boolean {
  const [a, b] = [resolve(named), resolve(recorded)];
  if (a === b) return true;
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/**
 * The scenario a record (or a queue job) was played in, taken only from what the user trusts: the
 * built-in scenarios, and the scenarios the user named (`named`: the `--scenario` values of the
 * command, folders or built-in names). A record names the folder it came from, but a record is data
 * (anyone can edit one and reseal its checksum), so that folder's code runs only when the user named
 * it. In order: a named folder at the path the record gives; a named scenario with the record's id
 * (a folder that moved, or a changed copy of a built-in one); the built-in scenario of that id, when
 * the record names no folder. A record that names a folder nobody named fails with
 * UntrustedScenarioError (or ScenarioFolderMissingError when nothing is there any more).
 */
export async function loadRecordScenario(
  recorded: RecordedScenario,
  registry: ScenarioRegistry,
  named: string | readonly string[] = [],
): Promise<Scenario> {
  const trusted = typeof named === 'string' ? [named] : named;
  const { source, options } = recorded;
  if (source !== undefined) {
    const folder = trusted.find((n) => isScenarioPath(n) && sameFolder(n, source));
    if (folder !== undefined) return loadScenarioFolder(folder, options);
  }
  const others: string[] = [];
  for (const name of trusted) {
    // Which scenario a named one is, found without the record's options: they belong to the scenario the
    // record names, never to another the user named (which may take none).
    const id = (await loadScenario(name, registry, {}).catch(() => loadScenario(name, registry, options))).id;
    if (id === recorded.id) return loadScenario(name, registry, options);
    others.push(`${name} is scenario ${id}`);
  }
  if (source === undefined) {
    if (Object.hasOwn(registry, recorded.id) || others.length === 0)
      return builtinScenario(recorded.id, registry, options);
    throw new UsageError(`the records were played in scenario ${recorded.id}, but ${others.join(', ')}`);
  }
  if (!scenarioEntry(resolve(source))) throw new ScenarioFolderMissingError(recorded.id, source);
  throw new UntrustedScenarioError(recorded.id, source, others);
}
