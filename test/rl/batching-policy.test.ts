import test from 'ava';
import type { PolicyOutput } from '../../src/core/types.ts';
import type { BatchPolicy, PolicyRequest } from '../../src/policy/policy.ts';
import { batchingPolicy } from '../../src/rl/batching-policy.ts';

/** A scripted batch policy: answers each request with its own episode id, and logs batch sizes. */
function echo(): BatchPolicy & { sizes: number[] } {
  const sizes: number[] = [];
  return {
    id: 'echo',
    version: 'v1',
    sizes,
    act: async (r) => ({ text: r.episodeId }),
    actBatch: async (rs: readonly PolicyRequest[]): Promise<PolicyOutput[]> => {
      sizes.push(rs.length);
      if (rs.some((r) => r.episodeId === 'boom')) throw new Error('batch failed');
      return rs.map((r) => ({ text: `<answer>${r.episodeId}</answer>` }));
    },
  };
}

const req = (episodeId: string): PolicyRequest => ({ episodeId, task: { id: 't', split: 'train', question: 'q' }, tools: [], messages: [], turn: 0, seed: 1, maxTokens: 8 });

test('concurrent act calls go out as one batch and each gets its own answer', async (t) => {
  const inner = echo();
  const p = batchingPolicy(inner, 64);
  const outs = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => p.act(req(id))));
  t.deepEqual(outs.map((o) => o.text), ['a', 'b', 'c', 'd', 'e'].map((id) => `<answer>${id}</answer>`));
  t.deepEqual(inner.sizes, [5]);
  t.is(p.version, 'v1');
});

test('batches are capped at maxBatch; a failing batch rejects only its own requests', async (t) => {
  const inner = echo();
  const p = batchingPolicy(inner, 2);
  const results = await Promise.allSettled(['a', 'b', 'boom', 'c', 'd'].map((id) => p.act(req(id))));
  t.deepEqual(inner.sizes, [2, 2, 1]);
  t.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled']);
});
