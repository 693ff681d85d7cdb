import { z } from 'zod';
import { tool } from 'agent-r1-ts';
import { DEFAULT_TOP_K, MAX_TOP_K, type SearchCorpus, type SearchHit } from './search.ts';

/** The per-episode state the QA ToolEnv creates: the corpus this task searches. */
export interface QaState {
  corpus: SearchCorpus;
}

function argumentsSchema(maxK: number) {
  return z
    .object({
      query: z.string().trim().min(1, 'query must not be empty').max(500),
      k: z.number().int().min(1).max(maxK).optional(),
    })
    .strict();
}

export const searchArguments = argumentsSchema(MAX_TOP_K);

export type SearchArguments = z.infer<typeof searchArguments>;

/** What the search tool returns (its raw result; the ToolEnv renders it). */
export type SearchOutput = {
  query: string;
  k: number;
  results: Array<{ id: string; title: string; text: string }>;
};

/**
 * BM25 search over the episode's corpus, top k ≤ maxK. Not `cacheable` through the runner: the
 * runner's key is the arguments alone, but the answer also depends on the corpus (per world, or
 * per dataset task), so the corpus keeps its own cache keyed by (corpus id, query, k).
 */
export function createSearchTool(maxK: number = MAX_TOP_K) {
  return tool({
    name: 'search',
    description: `Search the encyclopedia. Returns the top k documents (default ${DEFAULT_TOP_K}, at most ${maxK}) with their titles and text.`,
    parameters: argumentsSchema(maxK),
    execute(args: SearchArguments, ctx): SearchOutput {
      const state = ctx.state as QaState | undefined;
      if (!state?.corpus) throw new Error('no corpus for this episode (the QA env did not initialise it)');
      const k = args.k ?? DEFAULT_TOP_K;
      // The corpus' cached hits themselves, frozen (a write throws), so no record can change
      // another's, and their JSON is written once for every record that holds them (Json has no
      // readonly arrays, hence the cast).
      return { query: args.query, k, results: state.corpus.search(args.query, k) as SearchHit[] };
    },
  });
}

/** The search tool of the generated world (k up to 10). */
export const searchTool = createSearchTool();
