import { z } from 'zod';
import { tool } from '../../src/tools/tool.ts';
import { DEFAULT_TOP_K, MAX_TOP_K, type SearchCorpus } from './search.ts';

/** The per-episode state the QA ToolEnv creates: the corpus this task searches. */
export interface QaState {
  corpus: SearchCorpus;
}

export const searchArguments = z
  .object({
    query: z.string().trim().min(1, 'query must not be empty').max(500),
    k: z.number().int().min(1).max(MAX_TOP_K).optional(),
  })
  .strict();

export type SearchArguments = z.infer<typeof searchArguments>;

/** What the search tool returns (its raw result; the ToolEnv renders it). */
export type SearchOutput = {
  query: string;
  k: number;
  results: Array<{ id: string; title: string; text: string }>;
};

/**
 * BM25 search over the episode's corpus. Not `cacheable` through the runner: the runner's key is
 * the arguments alone, but the answer also depends on the corpus (per world, or per dataset task),
 * so the corpus keeps its own cache keyed by (corpus id, query, k).
 */
export const searchTool = tool({
  name: 'search',
  description: `Search the encyclopedia. Returns the top k documents (default ${DEFAULT_TOP_K}) with their titles and text.`,
  parameters: searchArguments,
  execute(args: SearchArguments, ctx): SearchOutput {
    const state = ctx.state as QaState | undefined;
    if (!state?.corpus) throw new Error('no corpus for this episode (the QA env did not initialise it)');
    const k = args.k ?? DEFAULT_TOP_K;
    return { query: args.query, k, results: state.corpus.search(args.query, k) };
  },
});
