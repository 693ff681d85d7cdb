import MiniSearch from 'minisearch';
import { LRUCache } from 'lru-cache';
import { deepFreeze } from 'agent-r1-ts';

/** One searchable document (an encyclopedia entry, a dataset paragraph). */
export interface QaDocument {
  /** Unique within its corpus. */
  id: string;
  title: string;
  text: string;
}

export interface SearchHit {
  id: string;
  title: string;
  text: string;
}

/** A document collection with BM25 search over it. */
export interface SearchCorpus {
  /** Identifies the corpus' content (world hash, dataset + task id): part of every cache key. */
  readonly id: string;
  readonly size: number;
  document(id: string): QaDocument | undefined;
  /** The top-k documents for the query, best first (BM25+, title boosted); frozen, shared by every caller. */
  search(query: string, k: number): readonly SearchHit[];
}

export const DEFAULT_TOP_K = 3;
export const MAX_TOP_K = 10;

// Titles weigh double: a query naming an entity should find that entity's own entry before the
// entries that merely mention it.
const TITLE_BOOST = 2;

/**
 * Results of every corpus, shared: lru-cache's `context` is not part of the key, so the key carries
 * everything the result depends on (corpus content id, k, the query text).
 */
const resultCache = new LRUCache<string, readonly SearchHit[]>({ max: 50_000 });

export function searchCacheKey(corpusId: string, query: string, k: number): string {
  return `${corpusId}\u0000${k}\u0000${query}`;
}

/** Builds a BM25 corpus over documents with minisearch (an index of title and text). */
export function createCorpus(id: string, documents: readonly QaDocument[]): SearchCorpus {
  const byId = new Map<string, QaDocument>();
  for (const doc of documents) {
    if (byId.has(doc.id)) throw new Error(`corpus ${id}: duplicate document id "${doc.id}"`);
    byId.set(doc.id, doc);
  }
  let index: MiniSearch<QaDocument> | undefined;
  const getIndex = () => {
    if (!index) {
      index = new MiniSearch<QaDocument>({ fields: ['title', 'text'], idField: 'id' });
      index.addAll(documents);
    }
    return index;
  };
  return {
    id,
    size: documents.length,
    document: (docId) => byId.get(docId),
    search(query, k) {
      const key = searchCacheKey(id, query, k);
      const cached = resultCache.get(key);
      if (cached) return cached;
      // Ties keep insertion order (minisearch sorts stably), so results are deterministic.
      const hits = getIndex()
        .search(query, { boost: { title: TITLE_BOOST }, combineWith: 'OR' })
        .slice(0, k)
        .map((r) => {
          const doc = byId.get(String(r.id))!;
          return { id: doc.id, title: doc.title, text: doc.text };
        });
      resultCache.set(key, deepFreeze(hits));
      return hits;
    },
  };
}
