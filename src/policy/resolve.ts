import { UnknownNameError } from '../core/errors.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { Policy } from './policy.ts';

/**
 * A policy from its command-line spec: one of the scenario's reference policies by name, or
 * `ckpt:DIR` for a trained checkpoint.
 */
export async function resolvePolicy(spec: string, scenario: Scenario, seed: number): Promise<Policy> {
  if (spec.startsWith('ckpt:')) {
    const { loadCheckpointPolicy } = await import('./tfjs/checkpoint.ts');
    return loadCheckpointPolicy(spec.slice('ckpt:'.length));
  }
  const factory = scenario.policies[spec];
  if (!factory) throw new UnknownNameError('policy', spec, [...Object.keys(scenario.policies), 'ckpt:DIR']);
  return factory({ scenario, seed });
}
