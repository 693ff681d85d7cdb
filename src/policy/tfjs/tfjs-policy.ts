import { LRUCache } from 'lru-cache';
import type { Json, PolicyOutput } from '../../core/types.ts';
import type { BatchPolicy, EncodingSpec, PolicyEncoding, PolicyRequest } from '../policy.ts';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.ts';
import { chatEncoding } from './chat-template.ts';
import type { RowCache, SamplingOptions } from '../../architectures/generation.ts';
import { generate } from './generate.ts';
import type { GPTModel } from '../../architectures/gpt/model.ts';
import type { Tokenizer } from './tokenizer.ts';

export interface TfjsPolicyOptions {
  id: string;
  /** The checkpoint's content hash (or any tag for an unsaved model). */
  version: string;
  model: GPTModel;
  tokenizer: Tokenizer;
  sampling?: SamplingOptions;
  /** Bytes of KV cache kept across turns, over all episodes (default 256 MiB). */
  cacheBytes?: number;
}

/**
 * The tfjs GPT as a BatchPolicy. Requests carry the whole history as ids (`req.tokens`, built with
 * `encode`); each episode's KV cache survives between its turns in an lru-cache bounded by bytes,
 * so a new turn only prefills the observation. Each request samples from a stream seeded by
 * `req.seed`, so its action does not depend on the rest of the batch.
 */
export class TfjsPolicy implements BatchPolicy {
  readonly id: string;
  readonly version: string;
  readonly encode: PolicyEncoding;
  readonly model: GPTModel;
  readonly tokenizer: Tokenizer;
  sampling: SamplingOptions;
  private readonly caches: LRUCache<string, RowCache>;
  private readonly stopTokens: Set<number>;
  private readonly eosTokens: Set<number>;

  constructor(options: TfjsPolicyOptions) {
    this.id = options.id;
    this.version = options.version;
    this.model = options.model;
    this.tokenizer = options.tokenizer;
    this.sampling = options.sampling ?? {};
    this.encode = chatEncoding(options.tokenizer);
    this.caches = new LRUCache<string, RowCache>({
      maxSize: options.cacheBytes ?? 256 * 1024 * 1024,
      sizeCalculation: (c) => Math.max(1, c.bytes),
    });
    const t = options.tokenizer;
    this.stopTokens = new Set([t.special('</tool_call>'), t.special('</answer>')]);
    this.eosTokens = new Set([t.eos, t.special('<|end|>')]);
  }

  /** Worker threads rebuild the encoding from the tokenizer. */
  get encodingSpec(): EncodingSpec {
    return { kind: 'gpt', tokenizer: this.tokenizer.toJSON() as unknown as Json };
  }

  async act(request: PolicyRequest): Promise<PolicyOutput> {
    return (await this.actBatch([request]))[0]!;
  }

  async actBatch(requests: readonly PolicyRequest[]): Promise<PolicyOutput[]> {
    const rows = requests.map((r) => {
      const tokens = r.tokens ?? this.encode.prompt(r.messages);
      // generate copies the cache it extends; the turn's new cache replaces this one.
      const cache = this.caches.get(r.episodeId);
      return { tokens, seed: r.seed, maxTokens: r.maxTokens, cache, episodeId: r.episodeId };
    });
    const results = await generate(this.model, rows, {
      sampling: this.sampling,
      stopTokens: this.stopTokens,
      eosTokens: this.eosTokens,
      keepCache: true,
      pad: this.tokenizer.pad,
    });
    return results.map((res, i) => {
      if (res.cache) this.caches.set(rows[i]!.episodeId, res.cache);
      else this.caches.delete(rows[i]!.episodeId);
      return { text: this.tokenizer.decode(res.tokens), tokens: res.tokens, logprobs: res.logprobs };
    });
  }

  /** Writes the weights as a checkpoint (so a worker thread can load a copy); returns its content hash. */
  async saveCheckpoint(dir: string): Promise<string> {
    return saveCheckpoint(dir, this.model, this.tokenizer);
  }

  release(episodeId: string): void {
    this.caches.delete(episodeId);
  }

  /** Drops every cached episode (e.g. after the weights change). */
  clearCache(): void {
    this.caches.clear();
  }

  get cachedBytes(): number {
    return this.caches.calculatedSize;
  }
}

/**
 * The `ckpt:DIR` policy: what resolvePolicy dynamic-imports. It samples as the checkpoint says
 * unless `sampling` overrides that; its version is the content hash, followed by the override when
 * there is one (`<hash>+temperature=0`), so records of one checkpoint sampled differently are told
 * apart (and never share a run id).
 */
export async function loadCheckpointPolicy(
  dir: string,
  options: { backend?: string; sampling?: SamplingOptions } = {},
): Promise<BatchPolicy> {
  const { initBackend } = await import('./backend.ts');
  await initBackend(options.backend);
  const ckpt = await loadCheckpoint(dir);
  const override = Object.entries(options.sampling ?? {})
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  const version = [ckpt.hash, ...override.map(([k, v]) => `${k}=${v}`)].join('+');
  const sampling = { ...samplingFromMeta(ckpt.meta), ...Object.fromEntries(override) };
  return new TfjsPolicy({ id: `ckpt:${dir}`, version, model: ckpt.model, tokenizer: ckpt.tokenizer, sampling });
}

function samplingFromMeta(meta: { [key: string]: Json }): SamplingOptions {
  const s = meta.sampling;
  if (s === null || typeof s !== 'object' || Array.isArray(s)) return {};
  const pick = (k: string) => (typeof s[k] === 'number' ? (s[k] as number) : undefined);
  return Object.fromEntries(
    Object.entries({ temperature: pick('temperature'), topK: pick('topK'), topP: pick('topP') }).filter(
      ([, v]) => v !== undefined,
    ),
  );
}
