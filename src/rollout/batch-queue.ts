import type { MessagePort } from 'node:worker_threads';
import { z } from 'zod';
import type { PolicyOutput } from '../core/types.ts';
import type { BatchPolicy, Policy, PolicyRequest } from '../policy/policy.ts';
import { generateRowSchema, type GenerateRow, type ServerMessage } from './protocol.ts';

export interface BatchQueueOptions {
  /** Most rows in one `actBatch` call. */
  maxBatch: number;
  /**
   * How long a lone row waits for company before it is served (ms). 0: until the event loop's next
   * turn. 'auto': a quarter of the last batch's compute time (at most 50 ms) — when a batch takes
   * long, waiting a little for other threads' rows is cheaper than serving them in a batch alone.
   */
  maxWaitMs: number | 'auto';
}

export interface BatchQueueStats {
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
  /** Malformed requests refused on a port. */
  rejected: number;
}

interface Pending {
  request: PolicyRequest;
  queuedAt: number;
  resolve(output: PolicyOutput): void;
  reject(error: Error): void;
}

const requestSchema = z.object({
  type: z.literal('generate'),
  id: z.number().int(),
  rows: z.array(generateRowSchema).min(1),
});

/**
 * Merges the generation requests of many episodes into `actBatch` calls of at most `maxBatch` rows.
 * Two front ends feed it: `direct()`, a Policy for episodes on this thread, and `attach(port)`, for
 * a worker thread's RemotePolicy. Batching never changes what an episode gets: a batch policy
 * samples each row from the row's own seeded stream.
 */
export class BatchQueue {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private running = false;
  private lastComputeMs = 0;
  private readonly sizes: { [size: number]: number } = {};
  private readonly counters = {
    requests: 0,
    rows: 0,
    batches: 0,
    generatedTokens: 0,
    computeMs: 0,
    queueMs: 0,
    rejected: 0,
  };

  constructor(
    private readonly policy: BatchPolicy,
    private readonly options: BatchQueueOptions,
  ) {}

  /** The policy as episodes on this thread use it: each `act` joins the next batch. */
  direct(): Policy {
    return {
      id: this.policy.id,
      version: this.policy.version,
      encode: this.policy.encode,
      release: (episodeId) => this.policy.release?.(episodeId),
      act: (request) => {
        this.counters.requests++;
        return new Promise((resolve, reject) =>
          this.enqueue({ request, queuedAt: performance.now(), resolve, reject }),
        );
      },
    };
  }

  /** Serves the generate and release messages of a worker's port; other message types are left to other listeners. */
  attach(port: MessagePort): void {
    port.on('message', (message: unknown) => this.receive(port, message));
  }

  private receive(port: MessagePort, message: unknown): void {
    const type = (message as { type?: unknown } | null)?.type;
    if (type === 'release') {
      const id = (message as { episodeId?: unknown }).episodeId;
      if (typeof id === 'string') this.policy.release?.(id);
      return;
    }
    // Records and heartbeats are the executor's.
    if (type === 'records' || type === 'alive') return;
    const parsed = requestSchema.safeParse(message);
    if (!parsed.success) {
      this.counters.rejected++;
      const id = (message as { id?: unknown } | null)?.id;
      const reply: ServerMessage = {
        type: 'error',
        id: typeof id === 'number' ? id : null,
        message: `malformed policy request: ${z.prettifyError(parsed.error)}`,
      };
      port.postMessage(reply);
      return;
    }
    this.counters.requests++;
    const { id, rows } = parsed.data;
    const outputs: PolicyOutput[] = new Array(rows.length);
    let remaining = rows.length;
    let failed = false;
    const queuedAt = performance.now();
    rows.forEach((row, slot) =>
      this.enqueue({
        request: rowRequest(row),
        queuedAt,
        // A request is answered once all its rows are, in the order the worker sent them.
        resolve: (output) => {
          outputs[slot] = output;
          if (--remaining === 0 && !failed)
            port.postMessage({ type: 'generated', id, outputs } satisfies ServerMessage);
        },
        reject: (error) => {
          if (failed) return;
          failed = true;
          port.postMessage({ type: 'error', id, message: error.message } satisfies ServerMessage);
        },
      }),
    );
  }

  private enqueue(pending: Pending): void {
    this.queue.push(pending);
    this.schedule();
  }

  private schedule(): void {
    if (this.running || this.immediate) return;
    const wait =
      this.options.maxWaitMs === 'auto' ? Math.min(50, Math.max(1, this.lastComputeMs / 4)) : this.options.maxWaitMs;
    if (this.queue.length >= this.options.maxBatch || wait === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.immediate = setImmediate(() => {
        this.immediate = undefined;
        void this.drain();
      });
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.drain();
      }, wait);
    }
  }

  private async drain(): Promise<void> {
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    try {
      const batch = this.queue.splice(0, this.options.maxBatch);
      const start = performance.now();
      for (const p of batch) this.counters.queueMs += start - p.queuedAt;
      let outputs: PolicyOutput[];
      try {
        outputs = await this.policy.actBatch(batch.map((p) => p.request));
      } catch (err) {
        const error = new Error(`policy failed: ${err instanceof Error ? err.message : String(err)}`);
        for (const p of batch) p.reject(error);
        return;
      }
      this.lastComputeMs = performance.now() - start;
      this.counters.computeMs += this.lastComputeMs;
      this.counters.batches++;
      this.counters.rows += batch.length;
      this.sizes[batch.length] = (this.sizes[batch.length] ?? 0) + 1;
      batch.forEach((p, i) => {
        const output = outputs[i]!;
        this.counters.generatedTokens += output.tokens?.length ?? 0;
        p.resolve(output);
      });
    } finally {
      this.running = false;
      if (this.queue.length > 0) this.schedule();
    }
  }

  stats(): BatchQueueStats {
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
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
  }
}

/** A worker's row as the request a batch policy takes (rows carry the history as token ids only). */
function rowRequest(row: GenerateRow): PolicyRequest {
  return {
    episodeId: row.episodeId,
    task: { id: row.episodeId, split: '', question: '' },
    tools: [],
    messages: [],
    tokens: row.tokens,
    turn: row.turn,
    seed: row.seed,
    maxTokens: row.maxTokens,
  };
}
