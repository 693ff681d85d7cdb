import { builtinScenarios } from '../scenarios/index.ts';
import { canonicalJson } from '../src/core/canonical-json.ts';
import { loadScenario } from '../src/scenario/load.ts';
import type { Scenario } from '../src/scenario/scenario.ts';

/** A worker builds each scenario (its world, its search index) once and keeps it for later tasks. */
const scenarios = new Map<string, Promise<Scenario>>();

export function scenarioFor(spec: { source: string; options: { [key: string]: string } }): Promise<Scenario> {
  const key = canonicalJson(spec);
  let s = scenarios.get(key);
  if (!s) {
    s = loadScenario(spec.source, builtinScenarios, spec.options);
    scenarios.set(key, s);
  }
  return s;
}
