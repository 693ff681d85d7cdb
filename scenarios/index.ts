import type { ScenarioDefinition } from 'agent-r1-ts';

/**
 * The built-in scenarios, loaded lazily so that listing them does not load every dependency.
 * Each entry's module has a default export: a Scenario, or a function of the scenario's options.
 */
export const builtinScenarios: { [name: string]: () => Promise<{ default: ScenarioDefinition }> } = {
  calculator: () => import('./calculator/index.ts'),
  'multihop-qa': () => import('./multihop-qa/index.ts'),
  hotpotqa: () => import('./hotpotqa/index.ts'),
  '2wiki': () => import('./2wiki/index.ts'),
  musique: () => import('./musique/index.ts'),
  'support-desk': () => import('./support-desk/index.ts'),
  helpdesk: () => import('./helpdesk/index.ts'),
  guessing: () => import('./guessing/index.ts'),
  gridworld: () => import('./gridworld/index.ts'),
  files: () => import('./files/index.ts'),
};
