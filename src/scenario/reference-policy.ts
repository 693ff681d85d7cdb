import { UnknownNameError } from '../core/errors.ts';
import type { Policy } from '../policy/policy.ts';
import type { Scenario } from './scenario.ts';

/** How a reference policy was made: enough for a worker thread or another machine to make the same one. */
export interface ReferencePolicySpec {
  name: string;
  seed: number;
}

const made = new WeakMap<Policy, ReferencePolicySpec>();

/**
 * One of the scenario's reference policies, made with `seed`. Remembers how it was made, so worker
 * threads rebuild it with the same seed (a policy that draws from its seed, such as multihop-qa's
 * noisy expert, then acts the same in every thread).
 */
export async function referencePolicy(scenario: Scenario, name: string, seed: number): Promise<Policy> {
  const factory = Object.hasOwn(scenario.policies, name) ? scenario.policies[name] : undefined;
  if (!factory) throw new UnknownNameError('policy', name, Object.keys(scenario.policies));
  const policy = await factory({ scenario, seed });
  made.set(policy, { name, seed });
  return policy;
}

/**
 * How a reference policy can be made again: as `referencePolicy` made it, or, for one made by
 * calling the scenario's factory directly, by its id with seed 0.
 */
export function referencePolicySpec(policy: Policy, scenario: Scenario): ReferencePolicySpec | undefined {
  return made.get(policy) ?? (Object.hasOwn(scenario.policies, policy.id) ? { name: policy.id, seed: 0 } : undefined);
}
