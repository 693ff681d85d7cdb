import type { MessagePort } from 'node:worker_threads';
import { z } from 'zod';
import type { PolicyOutput } from '../core/types.ts';
import type { BatchPolicy, PolicyRequest } from '../policy/policy.ts';
import { generateRowSchema, type GenerateRow, type ServerMessage } from './protocol.ts';

export interface PolicyServerOptions {
  /** Most rows in one generation batch. */
  maxBatch: number;
  /**
   * How long a lone request waits for company before it is served (ms). 'auto': a quarter of the
   * last batch's compute time (at most 50 ms) — when a batch takes long, waiting a little for the
   * other workers' rows is cheaper than serving them in a batch of their own.
   */
  maxWaitMs: number | 'auto';
}

export interface PolicyServerStats {
  requests: number;
  rows: number;
  batches: number;
  /** Histogram: batch size → count. */
  batchSizes: { [size: number]: number };
  meanBatchSize: number;
  generatedTokens: number;
  computeMs: number;
  meanQueueMs: number;
  tokensPerSecond: number;
  rejected: number;
}

/** A worker request being served; its rows may be spread over several batches. */
interface OpenRequest {
  port: MessagePort;
  id: number;
  outputs: PolicyOutput[];
  remaining: number;
  failed: boolean;
}

interface Pending {
  row: GenerateRow;
  request: OpenRequest;
  slot: number;
  queuedAt: number;
}

const requestSchema = z.object({ type: z.literal('generate'), id: z.number().int(), rows: z.array(generateRowSchema).min(1) });

/**
 * Holds the policy (and its weights) on the trainer's thread and serves every worker: requests from
 * all ports are merged into batches of at most `maxBatch` rows. A malformed request gets an error
 * reply on its own port; nothing else is affected.
 */
export class PolicyServer {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private readonly sizes: { [size: number]: number } = {};
  private counters = { requests: 0, rows: 0, batches: 0, generatedTokens: 0, computeMs: 0, queueMs: 0, rejected: 0 };

  constructor(
    private readonly policy: BatchPolicy,
    private readonly options: PolicyServerOptions,
  ) {}

  /** Serves requests arriving on a worker's port (other message types are left to other listeners). */
  attach(port: MessagePort): void {
    port.on('message', (message: unknown) => this.receive(port, message));
  }

  receive(port: MessagePort, message: unknown): void {
    const type = (message as { type?: unknown } | null)?.type;
    if (type === 'release') {
      const id = (message as { episodeId?: unknown }).episodeId;
      if (typeof id === 'string') this.policy.release?.(id);
      return;
    }
    if (type === 'record') return;
    const parsed = requestSchema.safeParse(message);
    if (!parsed.success) {
      this.counters.rejected++;
      const id = typeof (message as { id?: unknown } | null)?.id === 'number' ? (message as { id: number }).id : null;
      const reply: ServerMessage = { type: 'error', id, message: `malformed policy request: ${z.prettifyError(parsed.error)}` };
      port.postMessage(reply);
      return;
    }
    this.counters.requests++;
    const now = performance.now();
    const rows = parsed.data.rows;
    const request: OpenRequest = { port, id: parsed.data.id, outputs: new Array(rows.length), remaining: rows.length, failed: false };
    rows.forEach((row, slot) => this.queue.push({ row, request, slot, queuedAt: now }));
    this.schedule();
  }

  private schedule(): void {
    if (this.running) return;
    if (this.queue.length >= this.options.maxBatch) {
      clearTimeout(this.timer);
      this.timer = undefined;
      setImmediate(() => void this.drain());
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.drain();
      }, this.waitMs());
    }
  }

  private lastComputeMs = 0;

  private waitMs(): number {
    const wait = this.options.maxWaitMs;
    return wait === 'auto' ? Math.min(50, Math.max(1, this.lastComputeMs / 4)) : wait;
  }

  private async drain(): Promise<void> {
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    try {
      const batch = this.queue.splice(0, this.options.maxBatch);
      const start = performance.now();
      for (const p of batch) this.counters.queueMs += start - p.queuedAt;
      const requests: PolicyRequest[] = batch.map((p) => ({
        episodeId: p.row.episodeId,
        task: { id: p.row.episodeId, split: '', question: '' },
        tools: [],
        messages: [],
        tokens: p.row.tokens,
        turn: p.row.turn,
        seed: p.row.seed,
        maxTokens: p.row.maxTokens,
      }));
      let outputs: PolicyOutput[];
      try {
        outputs = await this.policy.actBatch(requests);
      } catch (err) {
        const message = `policy failed: ${err instanceof Error ? err.message : String(err)}`;
        for (const p of batch) {
          if (p.request.failed) continue;
          p.request.failed = true;
          p.request.port.postMessage({ type: 'error', id: p.request.id, message } satisfies ServerMessage);
        }
        return;
      }
      this.lastComputeMs = performance.now() - start;
      this.counters.computeMs += this.lastComputeMs;
      this.counters.batches++;
      this.counters.rows += batch.length;
      this.sizes[batch.length] = (this.sizes[batch.length] ?? 0) + 1;
      batch.forEach((p, i) => {
        const out = outputs[i]!;
        this.counters.generatedTokens += out.tokens?.length ?? 0;
        p.request.outputs[p.slot] = out;
        // A request is answered once all its rows are, in the order the worker sent them.
        if (--p.request.remaining === 0 && !p.request.failed) {
          p.request.port.postMessage({ type: 'generated', id: p.request.id, outputs: p.request.outputs } satisfies ServerMessage);
        }
      });
    } finally {
      this.running = false;
      if (this.queue.length > 0) this.schedule();
    }
  }

  stats(): PolicyServerStats {
    const c = this.counters;
    return {
      requests: c.requests,
      rows: c.rows,
      batches: c.batches,
      batchSizes: { ...this.sizes },
      meanBatchSize: c.batches ? c.rows / c.batches : 0,
      generatedTokens: c.generatedTokens,
      computeMs: c.computeMs,
      meanQueueMs: c.rows ? c.queueMs / c.rows : 0,
      tokensPerSecond: c.computeMs ? (c.generatedTokens / c.computeMs) * 1000 : 0,
      rejected: c.rejected,
    };
  }

  close(): void {
    clearTimeout(this.timer);
  }
}
