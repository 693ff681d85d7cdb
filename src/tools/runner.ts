import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { canonicalJson, inCanonicalOrderCopy } from '../core/canonical-json.ts';
import type { Rng } from '../core/rng.ts';
import type { Json, Task, ToolCall, ToolErrorKind, ToolResult } from '../core/types.ts';
import { ToolOutput, type Tool, type ToolContext } from './tool.ts';

export interface ToolRunnerOptions {
  timeoutMs: number;
  maxOutputChars: number;
  /** Told how long each tool execution took (ms), for the rollout's time shares. */
  onToolTime?: (ms: number) => void;
  /** Shared result cache for cacheable tools; keyed by tool name + canonical arguments. */
  cache?: ToolCache;
}

/** A cached tool result: the value, and its text (made once, not on every hit). */
export interface CachedToolResult {
  value: Json;
  text: string;
}

/** Results of deterministic tools, shared by the episodes of a thread. */
export type ToolCache = LRUCache<string, CachedToolResult>;

export function createToolCache(max = 10_000): ToolCache {
  return new LRUCache<string, CachedToolResult>({ max });
}

const sharedCaches = new WeakMap<object, ToolCache>();

/**
 * The tool cache of one owner (a scenario): kept across rollouts, so a trainer's later steps find
 * earlier results, but never shared between scenarios, whose tools of the same name differ.
 */
export function toolCacheOf(owner: object): ToolCache {
  let cache = sharedCaches.get(owner);
  if (!cache) sharedCaches.set(owner, (cache = createToolCache()));
  return cache;
}

/**
 * Runs tool calls for an episode: checks the tool exists and the arguments fit its schema, enforces
 * the timeout, cuts long output. It never throws: every failure becomes an error result that the
 * ToolEnv turns into an observation, so one bad call cannot end a rollout.
 */
export class ToolRunner {
  private readonly byName: Map<string, Tool>;

  constructor(
    tools: readonly Tool[],
    private readonly options: ToolRunnerOptions,
  ) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
  }

  async run(
    call: ToolCall,
    ctx: Omit<ToolContext, 'signal' | 'timeoutMs'> & { signal?: AbortSignal },
  ): Promise<ToolResult> {
    const t = this.byName.get(call.name);
    if (!t) {
      const names = [...this.byName.keys()].join(', ') || '(none)';
      return failure(call.name, 'unknown_tool', `unknown tool "${call.name}"; available tools: ${names}`);
    }
    const parsed = t.parameters.safeParse(call.arguments);
    if (!parsed.success) {
      return failure(
        call.name,
        'bad_arguments',
        `invalid arguments for ${call.name}: ${z.prettifyError(parsed.error)}`,
      );
    }
    const key = t.cacheable && this.options.cache ? `${t.name}\u0000${canonicalJson(parsed.data)}` : undefined;
    const hit = key === undefined ? undefined : this.options.cache!.get(key);
    if (hit) return this.success(t.name, hit);

    const timeoutMs = t.timeoutMs ?? this.options.timeoutMs;
    const abort = new LazyAbort();
    const onOuterAbort = () => abort.abort(ctx.signal?.reason);
    ctx.signal?.addEventListener('abort', onOuterAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const work = Promise.resolve().then(() => {
        // Time the tool itself: its synchronous work, or until its promise settles. (Timing the
        // whole call would count other episodes' work that runs while this one awaits.)
        const start = performance.now();
        const out = t.execute(parsed.data, new ToolCallContext(ctx.task, ctx.rng, ctx.state, timeoutMs, abort));
        if (!(out instanceof Promise)) {
          this.options.onToolTime?.(performance.now() - start);
          return out;
        }
        return out.finally(() => this.options.onToolTime?.(performance.now() - start));
      });
      work.catch(() => {}); // a late rejection after a timeout must not become unhandled
      const value = await Promise.race([work, timeout]);
      if (value === 'timeout') {
        abort.abort(new Error('timeout'));
        return failure(t.name, 'timeout', `${t.name} timed out after ${timeoutMs} ms`);
      }
      const result = toCached(value);
      if (key !== undefined) this.options.cache!.set(key, result);
      return this.success(t.name, result);
    } catch (err) {
      return failure(t.name, 'tool_error', `${t.name} failed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      clearTimeout(timer);
      ctx.signal?.removeEventListener('abort', onOuterAbort);
    }
  }

  // Results are built with their fields in canonical (sorted) order, as records write them.
  private success(name: string, { value, text }: CachedToolResult): ToolResult {
    const max = this.options.maxOutputChars;
    const truncated = text.length > max;
    const result = {
      content: truncated ? `${text.slice(0, max)}… [truncated ${text.length - max} characters]` : text,
    } as ToolResult;
    if (typeof value !== 'string') result.data = value;
    result.name = name;
    result.ok = true;
    if (truncated) result.truncated = true;
    return result;
  }
}

/** The result's value in canonical order (a copy where the tool's is not); its text as the tool wrote it. */
function toCached(raw: Json | ToolOutput | undefined): CachedToolResult {
  if (raw instanceof ToolOutput) {
    return { value: raw.data === undefined ? raw.text : inCanonicalOrderCopy(raw.data), text: raw.text };
  }
  const value = raw === undefined ? null : raw;
  return { value: inCanonicalOrderCopy(value), text: typeof value === 'string' ? value : JSON.stringify(value) };
}

function failure(name: string, kind: ToolErrorKind, message: string): ToolResult {
  return { content: message, error: { kind, message }, name, ok: false };
}

/**
 * What a tool's execute is given. A class, not `{ ...ctx, get signal() {…} }`: V8 gives each object
 * made by a spread and then a getter a hidden class of its own, which lives until a full GC and
 * keeps its getter, and all the getter's closure held (the whole call), alive through every
 * young-generation GC until then: over half of what those GCs copied in a rollout.
 */
class ToolCallContext implements ToolContext {
  constructor(
    readonly task: Task,
    readonly rng: Rng,
    readonly state: unknown,
    readonly timeoutMs: number,
    private readonly abort: LazyAbort,
  ) {}

  get signal(): AbortSignal {
    return this.abort.signal;
  }
}

/**
 * A tool call's abort signal, made when the tool first reads it: an AbortController costs ~4 µs,
 * more than many tools take, and most never look at their signal. Aborted before it is read, the
 * signal is born aborted, with the reason.
 */
class LazyAbort {
  private controller: AbortController | undefined;
  private reason: { value: unknown } | undefined;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason) this.controller.abort(this.reason.value);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.controller) this.controller.abort(reason);
    else this.reason ??= { value: reason };
  }
}
