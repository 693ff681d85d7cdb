import { resolve } from 'node:path';
import { LRUCache } from 'lru-cache';
import {
  generateOnKernel,
  type GenerateRequest,
  type RowCache,
  type SamplingOptions,
} from '../../architectures/generation.ts';
import { LlamaDecoder } from '../../architectures/llama/decoder.ts';
import type { LlamaModel } from '../../architectures/llama/model.ts';
import type { ActionFormat, PolicyOutput } from '../../core/types.ts';
import type { ChatTemplate } from '../../hf/chat-template.ts';
import { HfFolderError } from '../../hf/errors.ts';
import { loadModelDir } from '../../hf/checkpoint.ts';
import type { HfChat, LoadDtype } from '../../hf/folder.ts';
import type { BatchPolicy, EncodingSpec, PolicyRequest } from '../policy.ts';
import { HfChatEncoding } from './chat-encoding.ts';

export interface HfPolicyOptions {
  /** Default: temperature 1 over the whole vocabulary (the distribution RL trains). */
  sampling?: SamplingOptions;
  /** Bytes of KV cache kept across turns, over all episodes (default 256 MiB). */
  cacheBytes?: number;
  /** Positions the model runs at (default: the config's, at most 32768). */
  contextLength?: number;
  /**
   * How the weights are held: 'auto' keeps BF16 matrices 16-bit, 'F32' widens them. The logits are
   * the same bits either way (the kernel widens each lane exactly), so records are too.
   */
  dtype?: LoadDtype;
}

/**
 * A Hugging Face checkpoint of the Llama family as a BatchPolicy (`hf:DIR`): the model's own
 * tokenizer and chat template (HfChatEncoding), its own tool-call syntax (`actionFormat`), and
 * generation on the family's WebAssembly decode kernel. Each episode's KV cache survives between its
 * turns, so a turn prefills only its observation; each request samples from its own stream, so its
 * action does not depend on the batch.
 */
export class HfPolicy implements BatchPolicy {
  readonly encode: HfChatEncoding;
  readonly encodingSpec: EncodingSpec;
  readonly actionFormat: ActionFormat;
  private readonly caches: LRUCache<string, RowCache>;
  private readonly eos: ReadonlySet<number>;

  constructor(
    readonly id: string,
    readonly version: string,
    readonly folder: HfChat,
    readonly model: LlamaModel,
    public sampling: SamplingOptions = {},
    options: { cacheBytes?: number } = {},
  ) {
    const template = requireTemplate(folder);
    this.encode = new HfChatEncoding(folder.tokenizer, template, folder.eosTokenIds);
    this.encodingSpec = { kind: 'hf', dir: resolve(folder.dir) };
    this.actionFormat = actionFormatOf(template);
    this.eos = new Set(folder.eosTokenIds);
    this.caches = new LRUCache<string, RowCache>({
      maxSize: options.cacheBytes ?? 256 * 1024 * 1024,
      sizeCalculation: (c) => Math.max(1, c.bytes),
    });
  }

  async act(request: PolicyRequest): Promise<PolicyOutput> {
    return (await this.actBatch([request]))[0]!;
  }

  async actBatch(requests: readonly PolicyRequest[]): Promise<PolicyOutput[]> {
    const rows: GenerateRequest[] = requests.map((r) => ({
      tokens: r.tokens ?? this.encode.prompt(r.messages, r.tools),
      seed: r.seed,
      maxTokens: r.maxTokens,
      cache: this.caches.get(r.episodeId),
    }));
    const results = await generateOnKernel(LlamaDecoder.for(this.model), rows, {
      sampling: this.sampling,
      eosTokens: this.eos,
      keepCache: true,
    });
    return results.map((res, i) => {
      const episodeId = requests[i]!.episodeId;
      if (res.cache) this.caches.set(episodeId, res.cache);
      else this.caches.delete(episodeId);
      return this.output(res.tokens, res.logprobs);
    });
  }

  /** A turn's output: its text is the sampled ids but a final end-of-sequence token, decoded. */
  output(tokens: number[], logprobs: number[]): PolicyOutput {
    const last = tokens.at(-1);
    const body = last !== undefined && this.eos.has(last) ? tokens.slice(0, -1) : tokens;
    const text = this.folder.tokenizer.decode(body);
    const out: PolicyOutput = { text, tokens, logprobs };
    const again = this.folder.tokenizer.encode(text);
    let i = 0;
    while (i < body.length && again[i] === body[i]) i++;
    if (i < body.length || again.length !== body.length) out.tokenDrift = i;
    return out;
  }

  release(episodeId: string): void {
    this.caches.delete(episodeId);
  }

  /** Drops every cached episode (e.g. after the weights change). */
  clearCache(): void {
    this.caches.clear();
  }
}

function requireTemplate(folder: HfChat): ChatTemplate {
  if (!folder.template)
    throw new HfFolderError(
      folder.dir,
      null,
      'has no chat template (tokenizer_config.json chat_template or chat_template.jinja): a base model cannot play chat episodes',
    );
  return folder.template;
}

/** The tool-call syntax a chat template teaches its model. */
export function actionFormatOf(template: ChatTemplate): ActionFormat {
  const t = template.source;
  if (t.includes('<tool_call>')) return 'hermes';
  if (t.includes('<|python_tag|>') || (t.includes('"parameters"') && t.includes('ipython'))) return 'llama3-json';
  return 'hermes';
}

/**
 * The `hf:DIR` policy (and `ckpt:DIR` of a trained Hugging Face model, adapters merged): what resolvePolicy
 * dynamic-imports. It samples at temperature 1, or as a checkpoint says (its `sampling`), unless
 * `sampling` overrides that; its version is the content hash, followed by the override when there
 * is one (`<hash>+temperature=0`), so records of one model sampled differently are told apart.
 */
export async function loadHfPolicy(
  dir: string,
  options: HfPolicyOptions & { id?: string; saved?: SamplingOptions } = {},
): Promise<HfPolicy> {
  const { folder, model, hash } = await loadModelDir(dir, {
    contextLength: options.contextLength,
    dtype: options.dtype,
  });
  requireTemplate(folder);
  const override = Object.entries(options.sampling ?? {})
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  const version = [hash, ...override.map(([k, v]) => `${k}=${v}`)].join('+');
  const sampling = { ...options.saved, ...Object.fromEntries(override) };
  return new HfPolicy(options.id ?? `hf:${dir}`, version, folder, model, sampling, options);
}
