import type { MessagePort } from 'node:worker_threads';
import type { PolicyOutput } from '../core/types.ts';
import { AgentR1Error } from '../core/errors.ts';
import type { Policy, PolicyEncoding, PolicyRequest } from '../policy/policy.ts';
import type { GenerateRow, ServerMessage, WorkerMessage } from './protocol.ts';

/** The policy server refused or failed a request. */
export class PolicyServerError extends AgentR1Error {}

/**
 * A worker's stand-in for the policy that lives on the main thread. Episodes that reach `generate`
 * in the same turn of the event loop are sent together, as one request, so the server sees batches.
 */
export class RemotePolicy implements Policy {
  private nextId = 0;
  private queued: Array<{ row: GenerateRow; resolve: (o: PolicyOutput) => void; reject: (e: Error) => void }> = [];
  private readonly inFlight = new Map<
    number,
    Array<{ resolve: (o: PolicyOutput) => void; reject: (e: Error) => void }>
  >();
  private flushScheduled = false;

  constructor(
    private readonly port: MessagePort,
    readonly id: string,
    readonly version: string,
    readonly encode: PolicyEncoding,
  ) {}

  act(request: PolicyRequest): Promise<PolicyOutput> {
    const row: GenerateRow = {
      episodeId: request.episodeId,
      tokens: [...(request.tokens ?? this.encode.prompt(request.messages, request.tools))],
      seed: request.seed,
      maxTokens: request.maxTokens,
      turn: request.turn,
    };
    return new Promise((resolve, reject) => {
      this.queued.push({ row, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  release(episodeId: string): void {
    this.post({ type: 'release', episodeId });
  }

  /** Handles the server's reply to one of this worker's requests. */
  receive(message: ServerMessage): void {
    const waiting = message.id === null ? undefined : this.inFlight.get(message.id);
    if (message.type === 'error') {
      const targets = waiting ?? [...this.inFlight.values()].flat();
      if (message.id === null) this.inFlight.clear();
      else this.inFlight.delete(message.id);
      for (const w of targets) w.reject(new PolicyServerError(message.message));
      return;
    }
    if (!waiting) return;
    this.inFlight.delete(message.id);
    waiting.forEach((w, i) => {
      const out = message.outputs[i];
      if (out) w.resolve(out);
      else
        w.reject(
          new PolicyServerError(`the policy server sent ${message.outputs.length} outputs for ${waiting.length} rows`),
        );
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queued;
    this.queued = [];
    if (batch.length === 0) return;
    const id = this.nextId++;
    this.inFlight.set(id, batch);
    this.post({ type: 'generate', id, rows: batch.map((b) => b.row) });
  }

  private post(message: WorkerMessage): void {
    this.port.postMessage(message);
  }
}
