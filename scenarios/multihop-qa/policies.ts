import { createRng, deriveSeed, type Policy, type PolicyRequest, type PolicyFactory } from 'agent-r1-ts';
import type { QaTask } from './env.ts';
import { DEFAULT_TOP_K, type SearchCorpus } from './search.ts';

/** The action text of one search, in the Hermes format every QA policy writes. */
export function searchAction(query: string): string {
  return `<tool_call>${JSON.stringify({ name: 'search', arguments: { query } })}</tool_call>`;
}

export function answerAction(answer: string): string {
  return `<answer>${answer}</answer>`;
}

function scripted(id: string, act: (task: QaTask, req: PolicyRequest) => string): Policy {
  return {
    id,
    version: `${id}@1`,
    act: async (req) => ({ text: act(req.task as QaTask, req) }),
  };
}

/**
 * `expert`: knows the ground truth (task.meta.queries, the gold chain): issues the right search for
 * each hop, one per turn and in order, then answers with the gold answer.
 */
export function expertPolicy(): Policy {
  return scripted('expert', (task, req) => {
    const queries = task.meta.queries;
    return req.turn < queries.length ? searchAction(queries[req.turn]!) : answerAction(task.answer);
  });
}

/**
 * `naive-rag`: one search with the question itself (default k), then a perfect reader answers. The
 * reader answers correctly exactly when the retrieved documents include every gold supporting
 * document (the chain is fully in front of it); otherwise it cannot complete the chain and falls
 * back to its best guess, the top document's title ("unknown" when nothing came back). This is an
 * upper bound for single-retrieval RAG: a real reader does no better with the same documents.
 */
export function naiveRagPolicy(corpusFor: (task: QaTask) => SearchCorpus): Policy {
  return scripted('naive-rag', (task, req) => {
    if (req.turn === 0) return searchAction(task.question);
    const hits = corpusFor(task).search(task.question, DEFAULT_TOP_K);
    const ids = new Set(hits.map((h) => h.id));
    if (task.meta.gold.every((g) => ids.has(g))) return answerAction(task.answer);
    return answerAction(hits[0]?.title ?? 'unknown');
  });
}

/** How often the noisy expert errs, per episode. The rest of the episodes are expert episodes. */
export interface NoisyExpertRates {
  /**
   * Stops one search short of the chain and answers with what it would have searched next: the
   * bridge entity it has just read (the director instead of the director's birthplace) — the
   * classic multi-hop shortcut. The answer is still copied from the documents, only too early.
   */
  early: number;
  /** Follows the whole chain but answers with the distractor's value (a reading error). */
  distractor: number;
}

export const DEFAULT_NOISY_RATES: Readonly<NoisyExpertRates> = Object.freeze({ early: 0.1, distractor: 0.1 });

export type NoisyMode = 'clean' | 'early' | 'distractor';

/** The noisy expert's mode for one episode: a pure function of (policy seed, episode id). */
export function noisyMode(seed: number, episodeId: string, rates: NoisyExpertRates): NoisyMode {
  const u = createRng(deriveSeed('noisy-expert', seed, episodeId)).next();
  if (u < rates.early) return 'early';
  if (u < rates.early + rates.distractor) return 'distractor';
  return 'clean';
}

/**
 * `noisy-expert`: imperfect demonstrations for a supervised warm start. Per episode (decided from
 * the policy seed and the episode id, so records replay), with probability `rates.early` it answers
 * after one search too few (with the entity it would have searched next) and with probability `rates.distractor` it answers a distractor's value
 * after the full chain; otherwise it is the expert. Defaults: 10% + 10% ⇒ about 80% EM.
 */
export function noisyExpertPolicy(seed: number, rates: NoisyExpertRates = DEFAULT_NOISY_RATES): Policy {
  if (!(rates.early >= 0 && rates.distractor >= 0 && rates.early + rates.distractor <= 1)) {
    throw new RangeError(
      `noisy-expert rates must be ≥ 0 and sum to ≤ 1, got early=${rates.early} distractor=${rates.distractor}`,
    );
  }
  const policy = scripted('noisy-expert', (task, req) => {
    const mode = noisyMode(seed, req.episodeId, rates);
    const queries = task.meta.queries;
    const searches = mode === 'early' ? Math.max(1, queries.length - 1) : queries.length;
    if (req.turn < searches) return searchAction(queries[req.turn]!);
    if (mode === 'early') return answerAction(queries[searches] ?? task.meta.distractor ?? 'unknown');
    return answerAction(mode === 'clean' ? task.answer : (task.meta.distractor ?? 'unknown'));
  });
  return { ...policy, version: `noisy-expert@1:${rates.early},${rates.distractor}` };
}

/** The reference policies every QA scenario offers. */
export function qaPolicies(
  corpusFor: (task: QaTask) => SearchCorpus,
  rates: NoisyExpertRates = DEFAULT_NOISY_RATES,
): { [name: string]: PolicyFactory } {
  return {
    expert: () => expertPolicy(),
    'naive-rag': () => naiveRagPolicy(corpusFor),
    'noisy-expert': ({ seed }) => noisyExpertPolicy(seed, rates),
  };
}
