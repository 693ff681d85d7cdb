import test from 'ava';
import { serve } from './fixtures.ts';

// A web page on another origin must not make the server play (and record) episodes: browsers can
// send "simple" text/plain or form posts to any address without asking first.

const post = (url: string, body: string, headers: Record<string, string>) =>
  fetch(url, { method: 'POST', body, headers }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as { detail: string; code?: string },
  }));

test('cross-site posts to /reset and /step are refused and record nothing; JSON from a script is played', async (t) => {
  const s = await serve();
  const step = JSON.stringify({ action: { answer: '4' }, seed: 1 });
  const page = { origin: 'https://evil.example' };
  for (const [path, body] of [
    ['/reset', '{}'],
    ['/step', step],
  ] as const) {
    const plain = await post(s.url + path, body, { ...page, 'content-type': 'text/plain' });
    t.is(plain.status, 403, path);
    t.regex(plain.body.detail, /requests from https:\/\/evil\.example are not allowed/);
    const form = await post(s.url + path, `x=${encodeURIComponent(body)}`, {
      ...page,
      'content-type': 'application/x-www-form-urlencoded',
    });
    t.is(form.status, 403, path);
    // Even the JSON type, from a page (a preflighted request whose preflight it ignored).
    t.is((await post(s.url + path, body, { ...page, 'content-type': 'application/json' })).status, 403);
    // Without an Origin (not a browser), a body must still say it is JSON.
    const untyped = await post(s.url + path, body, { 'content-type': 'text/plain;charset=UTF-8' });
    t.is(untyped.status, 415, path);
    t.regex(untyped.body.detail, /Content-Type: application\/json" \(got "text\/plain;charset=UTF-8"\)/);
  }
  t.is(s.records.length, 0, 'a refused request recorded an episode');
  // A page of this machine, and a script: played.
  const local = { origin: 'http://localhost:3000', 'content-type': 'application/json; charset=utf-8' };
  t.is((await post(`${s.url}/step`, step, local)).status, 200);
  t.is((await post(`${s.url}/step`, step, { 'content-type': 'application/json' })).status, 200);
  t.is((await fetch(`${s.url}/reset`, { method: 'POST' })).status, 200, 'an empty reset needs no type');
  t.is(s.records.length, 3);
  await s.server.close();
});

test('arguments nested thousands deep are a VALIDATION_ERROR, not a stack overflow', async (t) => {
  const s = await serve();
  const json = { 'content-type': 'application/json' };
  for (const depth of [100, 2000, 100_000]) {
    const deep = `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const body = `{"action":{"tool_calls":[{"name":"echo","arguments":{"text":${deep}}}]}}`;
    const answer = await post(`${s.url}/step`, body, json);
    t.is(answer.status, 422, `depth ${depth}`);
    t.like(answer.body, { code: 'VALIDATION_ERROR' });
    t.regex(answer.body.detail, /nests deeper than 72 levels/);
  }
  // In the text of an action (within the token budget), the parser refuses them: an error
  // observation, and the episode goes on.
  const deep = `${'['.repeat(200)}1${']'.repeat(200)}`;
  const text = `<tool_call>{"name":"echo","arguments":{"text":${deep}}}</tool_call>`;
  const played = await fetch(`${s.url}/step`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ action: { text } }),
  });
  t.is(played.status, 200);
  const { observation } = (await played.json()) as { observation: { text: string } };
  t.regex(observation.text, /"arguments" of echo nest deeper than 64 levels/);
  await s.server.close();
});
