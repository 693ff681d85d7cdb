import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { connectEnv } from '../../src/env-server/client.ts';
import { EnvServerError } from '../../src/env-server/errors.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { call } from '../helpers/toy-scenario.ts';
import { rawSocket, serve, toy } from './fixtures.ts';

test('--max-sessions: one more connection gets CAPACITY_REACHED and is closed; a freed slot is reused', async (t) => {
  const s = await serve({ maxSessions: 2 });
  const a = await connectEnv(s.url);
  const b = await connectEnv(s.url);
  const extra = await rawSocket(s.ws);
  const refusal = await extra.next();
  t.like(refusal, { type: 'error', data: { code: 'CAPACITY_REACHED', active_sessions: 2, max_sessions: 2 } });
  t.regex(refusal.data.message as string, /Server at capacity: 2\/2 sessions active/);
  t.is((await extra.closed).code, 1013);
  // The TypeScript client reports it on its first call.
  const late = await connectEnv(s.url);
  const err = await t.throwsAsync(late.reset(), { instanceOf: EnvServerError });
  t.is(err!.code, 'CAPACITY_REACHED');
  // Stateless HTTP calls are sessions too while they run.
  const busy = await fetch(`${s.url}/reset`, {
    method: 'POST',
    body: '{}',
    headers: { 'content-type': 'application/json' },
  });
  t.is(busy.status, 503);
  t.like(await busy.json(), { code: 'CAPACITY_REACHED' });
  await a.close();
  const c = await connectEnv(s.url);
  t.false((await c.reset({ seed: 1 })).done);
  await Promise.all([b.close(), c.close()]);
  await s.server.close();
});

test('idle sessions are reaped: the client is told, the episode is recorded with why, the record replays', async (t) => {
  const s = await serve({ idleTimeoutMs: 150 });
  const c = await rawSocket(s.ws);
  await c.ask('{"type": "reset", "data": {"seed": 9}}');
  await c.ask(JSON.stringify({ type: 'step', data: { text: call('echo', { text: 'one' }) } }));
  const told = await c.next();
  t.like(told, { type: 'error', data: { code: 'SESSION_ERROR' } });
  t.regex(told.data.message as string, /idle for over 0\.15 s and is closed/);
  t.is((await c.closed).code, 1000);
  const [record] = await s.recorded(1);
  t.like(record, { status: 'error', endReason: 'error' });
  t.is(record!.turns.length, 1);
  t.regex(record!.error!, /^the session was idle for over 0\.15 s \(turn 1\)$/);
  t.true((await replayRecord(record!, toy())).verified);
  t.is(s.server.activeSessions, 0);
  await s.server.close();
});

test('a client that disconnects mid-episode loses nothing recorded, even with a step in flight', async (t) => {
  const s = await serve();
  const quiet = await rawSocket(s.ws);
  await quiet.ask('{"type": "reset", "data": {"seed": 1, "episode_id": "quiet"}}');
  await quiet.ask(JSON.stringify({ type: 'step', data: { text: call('roll') } }));
  quiet.ws.terminate();
  const busy = await rawSocket(s.ws);
  await busy.ask('{"type": "reset", "data": {"seed": 1, "episode_id": "busy"}}');
  // Gone while its tool runs (the hanging tool times out after 50 ms): that turn is still recorded.
  busy.ws.send(JSON.stringify({ type: 'step', data: { text: call('hang') } }));
  await new Promise((r) => setTimeout(r, 10));
  busy.ws.terminate();
  const records = await s.recorded(2);
  const byId = Object.fromEntries(records.map((r) => [r.episodeId, r]));
  t.is(byId.quiet!.turns.length, 1);
  t.is(byId.busy!.turns.length, 1);
  t.is(byId.busy!.turns[0]!.results[0]!.error!.kind, 'timeout');
  for (const r of records) {
    t.regex(r.error!, /^the client disconnected before the episode ended \(turn 1\)$/);
    t.true((await replayRecord(r, toy())).verified);
  }
  await s.server.close();
});

test('records go to DIR/episodes.jsonl, appended across restarts; shutdown records the episodes under way', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-env-'));
  for (const seed of [1, 2]) {
    const s = await serve({ recordDir: dir });
    const env = await connectEnv(s.url);
    await env.reset({ seed });
    if (seed === 1) await env.step({ answer: '42' });
    await s.server.close();
  }
  const { records, corrupt } = await loadRecords(join(dir, 'episodes.jsonl'));
  t.is(corrupt.length, 0);
  t.deepEqual(
    records.map((r) => r.endReason),
    ['answered', 'error'],
  );
  t.regex(records[1]!.error!, /the server shut down before the episode ended/);
  for (const r of records) t.true((await replayRecord(r, toy())).verified);
});
