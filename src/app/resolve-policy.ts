import { UnknownNameError, UsageError } from '../core/errors.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { referencePolicy } from '../scenario/reference-policy.ts';
import type { Policy } from '../policy/policy.ts';
import type { LoadDtype } from '../hf/folder.ts';

/**
 * A policy from its command-line spec: one of the scenario's reference policies by name, or
 * `ckpt:DIR` for a trained checkpoint, `hf:DIR` for a Hugging Face checkpoint folder (Llama, Qwen2,
 * Qwen3), or `openai:MODEL@BASE_URL` for any OpenAI-compatible endpoint
 * (key from OPENAI_API_KEY; see src/openai/external-policy.ts). `temperature` and `dtype` as
 * loadModelPolicy takes them.
 */
export async function resolvePolicy(
  spec: string,
  scenario: Scenario,
  seed: number,
  options: { temperature?: number; dtype?: LoadDtype } = {},
): Promise<Policy> {
  const model = await loadModelPolicy(spec, options);
  if (model) return model;
  // Scripted policies do not sample from logits, and an endpoint's temperature is its own setting.
  if (options.temperature !== undefined)
    throw new UsageError(`a temperature applies to model policies (ckpt:DIR, hf:DIR), not to "${spec}"`);
  if (options.dtype !== undefined)
    throw new UsageError(`--dtype applies to model policies (ckpt:DIR, hf:DIR), not to "${spec}"`);
  if (spec.startsWith('openai:')) {
    const { openAIPolicyFromSpec } = await import('../openai/external-policy.ts');
    return openAIPolicyFromSpec(spec);
  }
  if (!Object.hasOwn(scenario.policies, spec))
    throw new UnknownNameError('policy', spec, [
      ...Object.keys(scenario.policies),
      'ckpt:DIR',
      'hf:DIR',
      'openai:MODEL@BASE_URL',
    ]);
  return referencePolicy(scenario, spec, seed);
}

/**
 * Who plays a scenario's user (`--user-policy`): one of its scripted users by name, or any model
 * policy (`ckpt:DIR`, `hf:DIR`, `openai:MODEL@URL`) reading the user's own view.
 */
export async function resolveUserPolicy(spec: string, scenario: Scenario, seed: number): Promise<Policy> {
  const role = scenario.user;
  if (!role) throw new UsageError(`--user-policy: scenario ${scenario.id} has no user (it is not a conversation)`);
  if (Object.hasOwn(role.policies, spec)) return role.policies[spec]!({ scenario, seed });
  const model = await loadModelPolicy(spec);
  if (model) return model;
  if (spec.startsWith('openai:')) {
    const { openAIPolicyFromSpec } = await import('../openai/external-policy.ts');
    return openAIPolicyFromSpec(spec);
  }
  throw new UnknownNameError('user policy', spec, [
    ...Object.keys(role.policies),
    'ckpt:DIR',
    'hf:DIR',
    'openai:MODEL@URL',
  ]);
}

/**
 * The policy of a model spec: `ckpt:DIR`, a checkpoint this project saved (a Hugging Face model's,
 * full or LoRA adapters over their base, or the built-in GPT's), or `hf:DIR`, a Hugging Face folder;
 * null for any other spec. The one way every command reads a model policy, so each takes what the
 * others do. `temperature` replaces a checkpoint's own sampling temperature (0: greedy); `dtype`
 * says how a Hugging Face model's weights are held (LoadDtype: 16-bit matrices kept, or widened).
 */
export async function loadModelPolicy(
  spec: string,
  options: { temperature?: number; dtype?: LoadDtype } = {},
): Promise<Policy | null> {
  const sampling = { temperature: options.temperature };
  if (spec.startsWith('ckpt:')) {
    const dir = spec.slice('ckpt:'.length);
    // A trained Hugging Face model's checkpoint is its folder plus checkpoint.json; the GPT's, model.json.
    const { readHfCheckpoint, savedSampling } = await import('../hf/checkpoint.ts');
    const hf = await readHfCheckpoint(dir);
    if (hf) {
      const { loadHfPolicy } = await import('../policy/hf/hf-policy.ts');
      return loadHfPolicy(dir, { id: spec, saved: savedSampling(hf.meta), sampling, dtype: options.dtype });
    }
    const { loadCheckpointPolicy } = await import('../policy/tfjs/tfjs-policy.ts');
    return loadCheckpointPolicy(dir, { sampling });
  }
  if (spec.startsWith('hf:')) {
    const { loadHfPolicy } = await import('../policy/hf/hf-policy.ts');
    return loadHfPolicy(spec.slice('hf:'.length), { sampling, dtype: options.dtype });
  }
  return null;
}
