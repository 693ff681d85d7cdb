import type { EpisodeConfig, EpisodeRecord } from '../core/types.ts';
import { roleView } from '../record/role-view.ts';
import type { Policy } from '../policy/policy.ts';
import { modelHash, saveCheckpoint } from '../policy/tfjs/checkpoint.ts';
import type { SamplingOptions } from '../architectures/generation.ts';
import { SftError, trainSft, type SftOptions, type SftResult } from '../policy/tfjs/sft.ts';
import { TfjsPolicy } from '../policy/tfjs/tfjs-policy.ts';
import { rollout } from '../rollout/rollout.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import type { Scenario } from '../scenario/scenario.ts';

export interface RunSftOptions {
  scenario: Scenario;
  /** The reference policy whose episodes are cloned (with `role: 'user'`, the agent the user talks with). */
  teacher: Policy;
  /**
   * Whose turns are cloned: the agent's (the default) or the scenario's user's, from its own view of
   * each episode (roleView): a model that plays the user (`--user-policy ckpt:DIR`, `train --roles`).
   */
  role?: 'agent' | 'user';
  /** Who plays the scenario's user in the episodes (default: its own); with `role: 'user'`, the one cloned. */
  userPolicy?: Policy;
  episodes: number;
  seed: number;
  split?: string;
  /** Where to save the checkpoint (omit to keep it in memory only). */
  out?: string;
  /** Dev-split episodes evaluated at the end (0: none). */
  evalEpisodes?: number;
  evalSplit?: string;
  /** Episode settings of the collection and the dev eval (budgets; what each step is shown). */
  episode?: Partial<EpisodeConfig>;
  /** Sampling of the trained policy (saved with the checkpoint; used by the dev eval). */
  sampling?: SamplingOptions;
  train?: Omit<SftOptions, 'records' | 'seed'>;
  onPhase?: (phase: 'collect' | 'train' | 'save' | 'eval', detail: { [key: string]: unknown }) => void;
  onEvalRecord?: (done: number, total: number) => void;
}

export interface RunSftResult extends Omit<SftResult, 'model' | 'tokenizer'> {
  policy: TfjsPolicy;
  hash: string;
  teacherSuccess: number;
  eval?: RolloutSummary;
}

/**
 * The whole `agent-r1 sft` pipeline: collect the teacher's episodes, train, save (atomically),
 * evaluate on the dev split. Deterministic for a seed.
 */
export async function runSft(options: RunSftOptions): Promise<RunSftResult> {
  const split = options.split ?? 'train';
  options.onPhase?.('collect', { episodes: options.episodes, split });
  const { records, summary } = await rollout({
    scenario: options.scenario,
    policy: options.teacher,
    split,
    episodes: options.episodes,
    seed: options.seed,
    config: options.episode,
    ...(options.userPolicy ? { userPolicy: options.userPolicy } : {}),
  });
  options.onPhase?.('train', { records: records.length, teacherSuccess: summary.successRate });
  const user = options.role === 'user';
  const cloned = user ? userViews(records) : records;
  if (cloned.length === 0)
    throw new SftError(`the user never spoke in the ${records.length} episodes: nothing to clone`);
  // A demonstration the context would cut loses its last actions: refused, with the context that holds them all.
  const trained = await trainSft({ overContext: 'refuse', ...options.train, records: cloned, seed: options.seed });
  const sampling = options.sampling ?? {};
  let hash: string;
  if (options.out) {
    options.onPhase?.('save', { out: options.out });
    hash = await saveCheckpoint(options.out, trained.model, trained.tokenizer, {
      scenario: options.scenario.id,
      teacher: options.teacher.id,
      ...(user ? { role: 'user', user: options.userPolicy?.id ?? null } : {}),
      episodes: options.episodes,
      seed: options.seed,
      steps: trained.steps,
      finalLoss: trained.finalLoss,
      sampling: { ...sampling } as { [key: string]: number },
      // What each step was shown in the demonstrations: the policy expects the same in use.
      ...(options.episode?.context === undefined ? {} : { context: options.episode.context }),
    });
  } else {
    hash = await modelHash(trained.model, trained.tokenizer);
  }
  const policy = new TfjsPolicy({
    id: options.out ? `ckpt:${options.out}` : 'sft',
    version: hash,
    model: trained.model,
    tokenizer: trained.tokenizer,
    sampling,
  });
  const { model: _m, tokenizer: _t, ...stats } = trained;
  const result: RunSftResult = { ...stats, policy, hash, teacherSuccess: summary.successRate };
  const n = options.evalEpisodes ?? 0;
  if (n > 0) {
    const evalSplit = options.evalSplit ?? (options.scenario.splits.includes('dev') ? 'dev' : split);
    options.onPhase?.('eval', { episodes: n, split: evalSplit });
    let done = 0;
    result.eval = (
      await rollout({
        scenario: options.scenario,
        // The cloned user is evaluated as it will be used: answering the agent it learned from.
        ...(user ? { policy: options.teacher, userPolicy: policy } : { policy }),
        ...(!user && options.userPolicy ? { userPolicy: options.userPolicy } : {}),
        split: evalSplit,
        episodes: n,
        seed: options.seed + 1,
        config: options.episode,
        onRecord: () => options.onEvalRecord?.(++done, n),
      })
    ).summary;
  }
  return result;
}

/** The user's view of each episode it spoke in (an `ok` one). */
function userViews(records: readonly EpisodeRecord[]): EpisodeRecord[] {
  return records.flatMap((r) => {
    const view = r.status === 'ok' ? roleView(r, 'user') : null;
    return view ? [view] : [];
  });
}
