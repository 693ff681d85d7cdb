import { MessageChannel } from 'node:worker_threads';
import test from 'ava';
import type { PolicyOutput } from '../../src/core/types.ts';
import type { BatchPolicy, PolicyRequest } from '../../src/policy/policy.ts';
import { BatchQueue } from '../../src/rollout/batch-queue.ts';

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

const req = (episodeId: string): PolicyRequest => ({
  episodeId,
  task: { id: 't', split: 'train', question: 'q' },
  tools: [],
  messages: [],
  turn: 0,
  seed: 1,
  maxTokens: 8,
});

test('direct front end: concurrent act calls go out as one batch and each gets its own answer', async (t) => {
  const inner = echo();
  const p = new BatchQueue(inner, { maxBatch: 64, maxWaitMs: 0 }).direct();
  const outs = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => p.act(req(id))));
  t.deepEqual(
    outs.map((o) => o.text),
    ['a', 'b', 'c', 'd', 'e'].map((id) => `<answer>${id}</answer>`),
  );
  t.deepEqual(inner.sizes, [5]);
  t.is(p.version, 'v1');
});

test('batches are capped at maxBatch; a failing batch rejects only its own requests', async (t) => {
  const inner = echo();
  const p = new BatchQueue(inner, { maxBatch: 2, maxWaitMs: 0 }).direct();
  const results = await Promise.allSettled(['a', 'b', 'boom', 'c', 'd'].map((id) => p.act(req(id))));
  t.deepEqual(inner.sizes, [2, 2, 1]);
  t.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled'],
  );
});

test('port front end: a malformed request gets an error on its own port only; other workers are served', async (t) => {
  const server = new BatchQueue(echo(), { maxBatch: 8, maxWaitMs: 1 });
  const bad = new MessageChannel();
  const good = new MessageChannel();
  server.attach(bad.port1);
  server.attach(good.port1);
  const reply = (port: MessageChannel['port2']) => new Promise<any>((resolve) => port.once('message', resolve));
  const badReply = reply(bad.port2);
  const goodReply = reply(good.port2);
  bad.port2.postMessage({
    type: 'generate',
    id: 7,
    rows: [{ episodeId: 'x', tokens: [-1], seed: 1.5, maxTokens: 4, turn: 0 }],
  });
  good.port2.postMessage({
    type: 'generate',
    id: 1,
    rows: [{ episodeId: 'y', tokens: [1, 2, 3], seed: 1, maxTokens: 4, turn: 0 }],
  });
  const b = await badReply;
  t.is(b.type, 'error');
  t.is(b.id, 7);
  t.regex(b.message, /malformed policy request/);
  const g = await goodReply;
  t.is(g.type, 'generated');
  t.is(g.outputs.length, 1);
  t.is(server.stats().rejected, 1);
  bad.port2.postMessage('not even an object');
  t.is((await reply(bad.port2)).type, 'error');
  server.close();
  for (const c of [bad, good]) {
    c.port1.close();
    c.port2.close();
  }
});
