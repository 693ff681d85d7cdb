import test from 'ava';
import { connectEnv } from '../../src/env-server/client.ts';
import { EnvConnectionError, EnvServerError } from '../../src/env-server/errors.ts';
import { call } from '../helpers/toy-scenario.ts';
import { rawSocket, serve } from './fixtures.ts';

test('every bad message gets an OpenEnv error, and the session stays usable', async (t) => {
  const s = await serve({ maxMessageBytes: 2000 });
  const c = await rawSocket(s.ws);
  const expectError = async (raw: string, code: string, message: RegExp) => {
    const m = await c.ask(raw);
    t.is(m.type, 'error', raw.slice(0, 60));
    t.is(m.data.code, code, raw.slice(0, 60));
    t.regex(m.data.message as string, message, raw.slice(0, 60));
    return m.data;
  };
  await expectError('{"type": "reset"', 'INVALID_JSON', /^Invalid JSON: /);
  await expectError('[1, 2]', 'VALIDATION_ERROR', /a message is a JSON object/);
  await expectError('{"type": "jump"}', 'UNKNOWN_TYPE', /^Unknown message type: jump; this server answers reset, step/);
  await expectError('{"data": {}}', 'UNKNOWN_TYPE', /^Unknown message type: null/);
  await expectError('{"type": "mcp", "data": {}}', 'UNKNOWN_TYPE', /Unknown message type: mcp/);
  await expectError('{"type": "state", "extra": 1}', 'VALIDATION_ERROR', /unknown message fields: extra/);
  await expectError('{"type": "reset", "data": [1]}', 'VALIDATION_ERROR', /data must be a JSON object/);
  await expectError(
    JSON.stringify({ type: 'reset', data: { seed: 'x'.repeat(3000) } }),
    'VALIDATION_ERROR',
    /over the limit of 2000/,
  );
  // A step before any reset, and bad reset arguments.
  await expectError('{"type": "step", "data": {"text": "hi"}}', 'EXECUTION_ERROR', /no episode yet: send reset first/);
  const bad = await expectError(
    '{"type": "reset", "data": {"seed": -1, "sed": 3}}',
    'VALIDATION_ERROR',
    /invalid reset/,
  );
  t.deepEqual((bad.errors as { loc: string[] }[]).map((e) => e.loc.join('.')).sort(), ['', 'seed']);
  await expectError(
    '{"type": "reset", "data": {"split": "nope"}}',
    'VALIDATION_ERROR',
    /has no split "nope" \(it has train\)/,
  );
  await expectError(
    '{"type": "reset", "data": {"task": 3}}',
    'VALIDATION_ERROR',
    /task 3 is out of range: split train has 3 tasks \(0-2\)/,
  );

  const reset = await c.ask('{"type": "reset", "data": {"seed": 1}}');
  t.is(reset.type, 'observation');
  // Bad actions: none or two kinds, unknown fields, logprobs without tokens, an answer holding a tag.
  await expectError('{"type": "step"}', 'VALIDATION_ERROR', /a step needs data: the action/);
  await expectError(
    '{"type": "step", "data": {}}',
    'VALIDATION_ERROR',
    /exactly one of text, tool_calls or answer \(got none\)/,
  );
  await expectError(
    '{"type": "step", "data": {"text": "a", "answer": "b"}}',
    'VALIDATION_ERROR',
    /got text and answer/,
  );
  await expectError('{"type": "step", "data": {"txt": "a"}}', 'VALIDATION_ERROR', /Unrecognized key: "txt"/);
  await expectError(
    '{"type": "step", "data": {"text": "a", "logprobs": [-1]}}',
    'VALIDATION_ERROR',
    /logprobs needs tokens/,
  );
  await expectError('{"type": "step", "data": {"tool_calls": []}}', 'VALIDATION_ERROR', /tool_calls/);
  await expectError('{"type": "step", "data": {"answer": "a</answer>b"}}', 'VALIDATION_ERROR', /contains <\/answer>/);
  // None of that touched the episode: it is still at turn 0.
  const state = await c.ask('{"type": "state"}');
  t.like(state, { type: 'state', data: { step_count: 0, done: false } });
  const done = await c.ask('{"type": "step", "data": {"answer": "42"}}');
  t.like(done, { type: 'observation', data: { done: true } });
  await expectError(
    '{"type": "step", "data": {"answer": "42"}}',
    'EXECUTION_ERROR',
    /the episode is over \(ended: answered\); send reset/,
  );
  t.like(await c.ask('{"type": "reset", "data": {"seed": 2}}'), { type: 'observation', data: { done: false } });
  c.ws.close();
  await c.closed;
  await s.recorded(2);
  t.is(s.records[1]!.endReason, 'error');
  await s.server.close();
});

test('a client that sends too many messages at once is told to wait; the answers it waits for still come', async (t) => {
  const s = await serve();
  const c = await rawSocket(s.ws);
  await c.ask('{"type": "reset", "data": {"seed": 1}}');
  // The first step waits on a hanging tool (50 ms) while 20 state requests queue behind it.
  c.ws.send(JSON.stringify({ type: 'step', data: { text: call('hang') } }));
  for (let i = 0; i < 20; i++) c.ws.send('{"type": "state"}');
  const answers = await Promise.all(Array.from({ length: 21 }, () => c.next()));
  const refused = answers.filter((m) => m.type === 'error');
  t.true(refused.length >= 5);
  t.true(refused.every((m) => m.data.code === 'SESSION_ERROR' && /wait for them/.test(m.data.message as string)));
  t.is(answers.filter((m) => m.type === 'observation').length, 1);
  c.ws.close();
  await s.server.close();
});

test('loopback by default: other Host names and web origins are refused; --api-key guards all but /health', async (t) => {
  const s = await serve({ apiKey: 'sk-env' });
  const port = new URL(s.url).port;
  t.is((await fetch(`${s.url}/health`)).status, 200);
  const noKey = await fetch(`${s.url}/metadata`);
  t.is(noKey.status, 401);
  t.regex(((await noKey.json()) as { detail: string }).detail, /missing API key/);
  const key = { authorization: 'Bearer sk-env' };
  t.is((await fetch(`${s.url}/metadata`, { headers: key })).status, 200);
  t.is((await fetch(`${s.url}/metadata`, { headers: { authorization: 'Bearer nope' } })).status, 401);
  await t.throwsAsync(connectEnv(s.url), { instanceOf: EnvConnectionError, message: /401 missing API key/ });
  await t.throwsAsync(connectEnv(s.url, { apiKey: 'nope' }), { message: /401 incorrect API key/ });
  const env = await connectEnv(s.url, { apiKey: 'sk-env' });
  t.false((await env.reset({ seed: 1 })).done);
  await env.close();
  // DNS rebinding: a request that names another host is refused, over HTTP and WebSocket.
  const rebound = await rawHttp(port, 'GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n');
  t.regex(rebound, /^HTTP\/1\.1 421/);
  const upgrade = (extra: string) =>
    rawHttp(
      port,
      `GET /ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer sk-env\r\n${extra}\r\n`,
    );
  t.regex(await upgrade('Origin: https://evil.example\r\n'), /^HTTP\/1\.1 403[\s\S]*not allowed/);
  t.regex(await upgrade(''), /^HTTP\/1\.1 101/);
  t.regex(
    await rawHttp(
      port,
      `GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    ),
    /^HTTP\/1\.1 404/,
  );
  await s.server.close();
});

test('HTTP errors: unknown paths, wrong methods, bad JSON, bodies over the limit, /ws without an upgrade', async (t) => {
  const s = await serve({ maxMessageBytes: 1000 });
  const status = async (path: string, init?: RequestInit) => {
    const headers: Record<string, string> = init?.body === undefined ? {} : { 'content-type': 'application/json' };
    const res = await fetch(s.url + path, { ...init, headers });
    return { status: res.status, body: (await res.json()) as { detail: string; code?: string } };
  };
  const missing = await status('/nope');
  t.is(missing.status, 404);
  t.regex(missing.body.detail, /nothing at GET \/nope/);
  t.is((await status('/reset')).status, 405);
  t.is((await status('/metadata', { method: 'POST' })).status, 405);
  t.like(await status('/reset', { method: 'POST', body: '{"seed":' }), { status: 422, body: { code: 'INVALID_JSON' } });
  t.like(await status('/reset', { method: 'POST', body: '{"seed": -4}' }), {
    status: 422,
    body: { code: 'VALIDATION_ERROR' },
  });
  t.is((await status('/reset', { method: 'POST', body: JSON.stringify({ x: 'y'.repeat(2000) }) })).status, 413);
  t.like(await status('/step', { method: 'POST', body: '{}' }), { status: 422, body: { code: 'VALIDATION_ERROR' } });
  t.is((await status('/ws')).status, 426);
  // An empty body is an empty reset, as OpenEnv's default ResetRequest.
  t.is((await status('/reset', { method: 'POST' })).status, 200);
  await s.server.close();
});

test('the TypeScript client surfaces server errors with their OpenEnv codes, and the session goes on', async (t) => {
  const s = await serve();
  const env = await connectEnv(s.url);
  const err = await t.throwsAsync(env.step('x'), { instanceOf: EnvServerError });
  t.is(err!.code, 'EXECUTION_ERROR');
  await t.throwsAsync(env.reset({ split: 'dev' }), { message: /has no split "dev".*\(VALIDATION_ERROR\)/ });
  t.false((await env.reset({ seed: 0 })).done);
  await env.close();
  await t.throwsAsync(env.state(), { instanceOf: EnvConnectionError, message: /closed \(1000/ });
  await t.throwsAsync(connectEnv('ftp://x'), { message: /not an http\(s\) or ws\(s\) URL/ });
  await s.server.close();
});

/** Sends raw bytes to the port and returns everything the server answers until it closes (or 500 ms). */
async function rawHttp(port: string, request: string): Promise<string> {
  const { connect } = await import('node:net');
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(request));
    let out = '';
    socket.on('data', (d) => (out += d));
    const done = () => resolve(out);
    socket.on('close', done);
    socket.on('error', done);
    setTimeout(() => {
      socket.destroy();
      done();
    }, 500);
  });
}
