import type { PolicyOutput } from '../core/types.ts';
import type { BatchPolicy, Policy, PolicyRequest } from '../policy/policy.ts';

/**
 * Batches the `act` calls of episodes running concurrently in this thread into `actBatch` calls:
 * requests that arrive before the next macrotask go out together (up to `maxBatch`). The in-thread
 * rollout calls `act` once per episode, so without this a token policy decodes one row at a time.
 * Determinism holds because the tfjs policy samples every row from its own seeded stream and its
 * rows are bit-identical whatever else is in the batch.
 */
export function batchingPolicy(inner: BatchPolicy, maxBatch = 64): Policy & { batches: number[] } {
  let queue: { req: PolicyRequest; resolve: (o: PolicyOutput) => void; reject: (e: unknown) => void }[] = [];
  let scheduled = false;
  const batches: number[] = [];
  const flush = async () => {
    // Episodes whose previous batch just finished run their tools and come back within a few
    // macrotasks: wait one between batches so they join the next one.
    while (queue.length > 0) {
      await new Promise((r) => setImmediate(r));
      const take = queue.slice(0, maxBatch);
      queue = queue.slice(maxBatch);
      batches.push(take.length);
      try {
        const outs = await inner.actBatch(take.map((q) => q.req));
        take.forEach((q, i) => q.resolve(outs[i]!));
      } catch (error) {
        take.forEach((q) => q.reject(error));
      }
    }
    scheduled = false;
  };
  return {
    id: inner.id,
    version: inner.version,
    encode: inner.encode,
    release: inner.release?.bind(inner),
    batches,
    act(req: PolicyRequest): Promise<PolicyOutput> {
      return new Promise((resolve, reject) => {
        queue.push({ req, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          void flush();
        }
      });
    },
  };
}
