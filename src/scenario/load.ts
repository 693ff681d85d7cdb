import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ScenarioError, ScenarioOptionsError, UnknownNameError } from '../core/errors.ts';
import type { Scenario, ScenarioDefinition } from './scenario.ts';
import { importUserModule, scenarioEntry } from './user-module.ts';

export type ScenarioRegistry = { [name: string]: () => Promise<{ default: ScenarioDefinition }> };

/** Builds a scenario from its module's default export and the given options. */
export async function instantiateScenario(
  definition: ScenarioDefinition,
  options: { [key: string]: string },
): Promise<Scenario> {
  let scenario: Scenario;
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
  return scenario;
}

/**
 * A built-in scenario by name, or a user's scenario folder (a path containing index.ts or index.js).
 * Unknown names fail with the list of valid ones.
 */
export async function loadScenario(
  name: string,
  registry: ScenarioRegistry,
  options: { [key: string]: string } = {},
): Promise<Scenario> {
  const entry = registry[name];
  if (entry) return instantiateScenario((await entry()).default, options);
  const dir = resolve(name);
  if (name.includes('/') && existsSync(dir) && statSync(dir).isDirectory()) {
    const file = scenarioEntry(dir);
    if (!file) throw new ScenarioError(`${dir} has no index.ts (or index.js)`);
    const mod = (await importUserModule(file)) as { default?: ScenarioDefinition };
    if (!mod.default) throw new ScenarioError(`${file} has no default export`);
    return instantiateScenario(mod.default, options);
  }
  throw new UnknownNameError('scenario', name, Object.keys(registry));
}
