import { UnknownNameError } from '../core/errors.ts';
import type { Scenario } from '../scenario/scenario.ts';
import type { Policy } from './policy.ts';

/**
 * A policy from its command-line spec: one of the scenario's reference policies by name, or
 * `ckpt:DIR` for a trained checkpoint, or `openai:MODEL@BASE_URL` for any OpenAI-compatible endpoint
 * (key from OPENAI_API_KEY; see src/openai/external-policy.ts).
 */
export async function resolvePolicy(spec: string, scenario: Scenario, seed: number): Promise<Policy> {
  if (spec.startsWith('ckpt:')) {
    const { loadCheckpointPolicy } = await import('./tfjs/checkpoint.ts');
    return loadCheckpointPolicy(spec.slice('ckpt:'.length));
  }
  if (spec.startsWith('openai:')) {
    const { openAIPolicyFromSpec } = await import('../openai/external-policy.ts');
    return openAIPolicyFromSpec(spec);
  }
  const factory = scenario.policies[spec];
  if (!factory) throw new UnknownNameError('policy', spec, [...Object.keys(scenario.policies), 'ckpt:DIR', 'openai:MODEL@BASE_URL']);
  return factory({ scenario, seed });
}
