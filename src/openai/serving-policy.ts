import { canonicalJson } from '../core/canonical-json.ts';
import type { PolicyOutput } from '../core/types.ts';
import type { BatchPolicy, PolicyEncoding, PolicyRequest } from '../policy/policy.ts';
import type { SamplingOptions } from '../architectures/generation.ts';
import type { Tokenizer } from '../policy/tfjs/tokenizer.ts';

/** A token policy that can be served: a BatchPolicy with its tokenizer, sampling settings and context size (TfjsPolicy is one). */
export interface ServablePolicy extends BatchPolicy {
  readonly tokenizer: Tokenizer;
  sampling: SamplingOptions;
  readonly model: { readonly config: { readonly contextLength: number } };
}

/**
 * The served policy as the policy server sees it. The policy server's rows carry no sampling
 * settings, so each HTTP request registers its own (temperature, top_p) here under its row's id;
 * a merged batch is split into runs of equal settings, each generated with the policy's sampling
 * set to them. Rows without settings use the policy's own (the checkpoint's).
 */
export class ServingPolicy implements BatchPolicy {
  readonly id: string;
  readonly version: string;
  readonly encode?: PolicyEncoding;
  private readonly settings = new Map<string, SamplingOptions>();

  constructor(readonly inner: BatchPolicy & { sampling: SamplingOptions }) {
    this.id = inner.id;
    this.version = inner.version;
    this.encode = inner.encode;
  }

  /** Sampling settings for the row with this id (cleared by release). */
  configure(rowId: string, sampling: SamplingOptions): void {
    this.settings.set(rowId, sampling);
  }

  act(request: PolicyRequest): Promise<PolicyOutput> {
    return this.actBatch([request]).then((o) => o[0]!);
  }

  async actBatch(requests: readonly PolicyRequest[]): Promise<PolicyOutput[]> {
    const groups = new Map<string, { sampling: SamplingOptions; slots: number[] }>();
    requests.forEach((r, slot) => {
      const sampling = this.settings.get(r.episodeId) ?? this.inner.sampling;
      const k = canonicalJson(sampling);
      const g = groups.get(k) ?? { sampling, slots: [] };
      g.slots.push(slot);
      groups.set(k, g);
    });
    const outputs: PolicyOutput[] = new Array(requests.length);
    const own = this.inner.sampling;
    try {
      for (const { sampling, slots } of groups.values()) {
        this.inner.sampling = sampling;
        const out = await this.inner.actBatch(slots.map((s) => requests[s]!));
        slots.forEach((s, i) => (outputs[s] = out[i]!));
      }
    } finally {
      this.inner.sampling = own;
    }
    return outputs;
  }

  release(rowId: string): void {
    this.settings.delete(rowId);
    this.inner.release?.(rowId);
  }
}
