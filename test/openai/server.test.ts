import test from 'ava';
import { request } from 'node:http';
import { UsageError } from '../../src/core/errors.ts';
import type { Task } from '../../src/core/types.ts';
import OpenAI from 'openai';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { ChatServer } from '../../src/openai/server.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { calc, calculatorCheckpoint } from './fixtures.ts';

const KEY = 'sk-test-key';
const MODEL = 'calc-tiny';

let server: ChatServer;
let client: OpenAI;

test.before(async () => {
  const { dir } = await calculatorCheckpoint();
  const policy = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
  server = new ChatServer({ policy, modelName: MODEL, apiKey: KEY, maxBodyBytes: 64 * 1024, maxWaitMs: 20 });
  await server.listen(0, '127.0.0.1');
  client = new OpenAI({ apiKey: KEY, baseURL: server.url, maxRetries: 0 });
});

test.after.always(async () => {
  await server?.close();
});

const task = (calc.tasks({ split: 'train', seed: 0, count: 1 }) as Task[])[0]!;
const tools = openAITools(calc) as OpenAI.ChatCompletionTool[];
const prompt = calc.env.prompt(task, openAITools(calc)) as OpenAI.ChatCompletionMessageParam[];

const raw = (path: string, init: RequestInit & { key?: string | null } = {}) =>
  fetch(server.url + path, {
    ...init,
    headers: {
      'content-type': 'application/json',
      ...(init.key === null ? {} : { authorization: `Bearer ${init.key ?? KEY}` }),
    },
  });

test('the official openai client lists the served model', async (t) => {
  const models = await client.models.list();
  t.deepEqual(
    models.data.map((m) => m.id),
    [MODEL],
  );
  t.is((await client.models.retrieve(MODEL)).id, MODEL);
});

test('a completion with a tool call (arguments as a JSON string), then the answer after the tool result', async (t) => {
  const first = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    tools,
    temperature: 0,
    max_tokens: 40,
    seed: 1,
  });
  const choice = first.choices[0]!;
  t.is(choice.finish_reason, 'tool_calls');
  t.is(choice.message.content, null);
  const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
  t.is(call.type, 'function');
  t.is(call.function.name, 'calculate');
  t.is(typeof call.function.arguments, 'string');
  t.is(typeof JSON.parse(call.function.arguments).expression, 'string');
  t.true(first.usage!.prompt_tokens > 20);
  t.true(first.usage!.completion_tokens > 0);
  t.is(first.usage!.total_tokens, first.usage!.prompt_tokens + first.usage!.completion_tokens);
  t.is(first.model, MODEL);

  // The conversation goes on the way an agent loop sends it: the assistant message, then the tool result.
  const second = await client.chat.completions.create({
    model: MODEL,
    messages: [...prompt, choice.message, { role: 'tool', tool_call_id: call.id, content: task.answer! }],
    tools,
    temperature: 0,
    max_tokens: 40,
  });
  t.is(second.choices[0]!.finish_reason, 'stop');
  t.regex(second.choices[0]!.message.content!, /^<answer>.*<\/answer>$/);
  t.is(second.choices[0]!.message.tool_calls, undefined);
  t.true(second.usage!.prompt_tokens > first.usage!.prompt_tokens + first.usage!.completion_tokens);
});

test('a streamed completion carries the same tool call, then usage and [DONE]', async (t) => {
  const plain = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    tools,
    temperature: 0,
    max_tokens: 40,
  });
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    tools,
    temperature: 0,
    max_tokens: 40,
    stream: true,
    stream_options: { include_usage: true },
  });
  let name = '';
  let args = '';
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    t.is(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const c of choice.delta.tool_calls ?? []) {
      name += c.function?.name ?? '';
      args += c.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  const call = plain.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
  t.is(name, call.function.name);
  t.is(args, call.function.arguments);
  t.is(finish, 'tool_calls');
  t.deepEqual(usage, plain.usage);
  t.true(chunks >= 4);

  // The client's stream helper accumulates the chunks into a whole completion.
  const helper = client.chat.completions.stream({
    model: MODEL,
    messages: prompt,
    tools,
    temperature: 0,
    max_tokens: 40,
  });
  const final = await helper.finalChatCompletion();
  t.deepEqual(
    (final.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall).function,
    call.function,
  );
});

test('logprobs and token ids come back when asked (vLLM-style token_id:N tokens too)', async (t) => {
  const res = await raw('/chat/completions', {
    method: 'POST',
    body: JSON.stringify({
      model: MODEL,
      messages: prompt,
      temperature: 0,
      max_tokens: 40,
      logprobs: true,
      return_tokens_as_token_ids: true,
    }),
  });
  t.is(res.status, 200);
  const body = (await res.json()) as any;
  const choice = body.choices[0];
  t.is(choice.logprobs.content.length, body.usage.completion_tokens);
  t.deepEqual(
    choice.logprobs.content.map((e: any) => Number(e.token.slice('token_id:'.length))),
    choice.token_ids,
  );
  t.true(choice.logprobs.content.every((e: any) => e.logprob <= 0));
});

test('stop strings cut the text; max_tokens bounds the completion; tool_choice none returns text', async (t) => {
  const none = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    tools,
    tool_choice: 'none',
    temperature: 0,
    max_tokens: 40,
  });
  t.regex(none.choices[0]!.message.content!, /^<tool_call>/);
  t.is(none.choices[0]!.message.tool_calls, undefined);
  // Without tools in the request, a call stays text (as with the OpenAI API).
  const noTools = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    temperature: 0,
    max_tokens: 40,
  });
  t.is(noTools.choices[0]!.message.content, none.choices[0]!.message.content);
  t.is(noTools.choices[0]!.message.tool_calls, undefined);
  const cut = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    temperature: 0,
    max_tokens: 40,
    stop: ['"arguments"'],
  });
  t.is(cut.choices[0]!.message.content, none.choices[0]!.message.content!.split('"arguments"')[0]);
  t.is(cut.choices[0]!.finish_reason, 'stop');
  const short = await client.chat.completions.create({ model: MODEL, messages: prompt, temperature: 0, max_tokens: 3 });
  t.is(short.usage!.completion_tokens, 3);
  t.is(short.choices[0]!.finish_reason, 'length');
});

test.serial('concurrent requests are merged into batches by the policy server', async (t) => {
  const before = server.stats()!;
  await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      client.chat.completions.create({ model: MODEL, messages: prompt, temperature: 1, seed: i, max_tokens: 8 }),
    ),
  );
  const after = server.stats()!;
  const rows = after.rows - before.rows;
  const batches = after.batches - before.batches;
  t.is(rows, 6);
  t.true(batches < 6, `${batches} batches for 6 requests`);
});

test('bad requests get OpenAI error objects and status codes; the server keeps serving', async (t) => {
  const cases: Array<[string, RequestInit & { key?: string | null }, number, string | null, string | null]> = [
    ['not JSON', { method: 'POST', body: '{"model": ' }, 400, 'invalid_json', null],
    ['no messages', { method: 'POST', body: JSON.stringify({ model: MODEL }) }, 400, 'invalid_request', 'messages'],
    [
      'empty messages',
      { method: 'POST', body: JSON.stringify({ model: MODEL, messages: [] }) },
      400,
      'invalid_request',
      'messages',
    ],
    [
      'a bad role',
      { method: 'POST', body: JSON.stringify({ model: MODEL, messages: [{ role: 'robot', content: 'x' }] }) },
      400,
      'invalid_request',
      'messages.0.role',
    ],
    [
      'temperature of the wrong type',
      { method: 'POST', body: JSON.stringify({ model: MODEL, messages: prompt, temperature: 'hot' }) },
      400,
      'invalid_request',
      'temperature',
    ],
    [
      'n > 1',
      { method: 'POST', body: JSON.stringify({ model: MODEL, messages: prompt, n: 2 }) },
      400,
      'invalid_request',
      'n',
    ],
    [
      'an image part',
      {
        method: 'POST',
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }],
        }),
      },
      400,
      'invalid_request',
      'messages.0.content.0',
    ],
    [
      'tool_choice for a missing tool',
      {
        method: 'POST',
        body: JSON.stringify({
          model: MODEL,
          messages: prompt,
          tools,
          tool_choice: { type: 'function', function: { name: 'nope' } },
        }),
      },
      400,
      'invalid_request',
      'tool_choice',
    ],
    [
      'a conversation ending with the assistant',
      {
        method: 'POST',
        body: JSON.stringify({ model: MODEL, messages: [...prompt, { role: 'assistant', content: 'hi' }] }),
      },
      400,
      'invalid_conversation',
      'messages',
    ],
    [
      'an unknown model',
      { method: 'POST', body: JSON.stringify({ model: 'gpt-9', messages: prompt }) },
      400,
      'model_not_found',
      'model',
    ],
    [
      'a wrong key',
      { method: 'POST', body: JSON.stringify({ model: MODEL, messages: prompt }), key: 'sk-wrong' },
      401,
      'invalid_api_key',
      null,
    ],
    [
      'no key',
      { method: 'POST', body: JSON.stringify({ model: MODEL, messages: prompt }), key: null },
      401,
      'invalid_api_key',
      null,
    ],
    [
      'a body over the limit',
      {
        method: 'POST',
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(100_000) }] }),
      },
      413,
      'request_too_large',
      null,
    ],
    ['GET on completions', { method: 'GET' }, 405, 'method_not_allowed', null],
  ];
  for (const [what, init, status, code, param] of cases) {
    const res = await raw('/chat/completions', init);
    t.is(res.status, status, what);
    const body = (await res.json()) as any;
    t.is(typeof body.error.message, 'string', what);
    t.true(body.error.message.length > 5, what);
    t.is(body.error.code, code, what);
    t.is(body.error.param, param, what);
    t.is(typeof body.error.type, 'string', what);
  }
  // A chunked body (no content-length) is cut off at the limit too.
  const chunked = await fetch(server.url + '/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: new ReadableStream({
      start(controller) {
        for (let i = 0; i < 10; i++) controller.enqueue(new TextEncoder().encode('x'.repeat(10_000)));
        controller.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  t.is(chunked.status, 413);
  t.is(((await chunked.json()) as any).error.code, 'request_too_large');
  const unknownUrl = await raw('/completions', { method: 'POST', body: '{}' });
  t.is(unknownUrl.status, 404);
  // The official client maps them to its error classes.
  await t.throwsAsync(client.chat.completions.create({ model: 'gpt-9', messages: prompt }), {
    instanceOf: OpenAI.BadRequestError,
    message: /does not exist/,
  });
  const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: server.url, maxRetries: 0 });
  await t.throwsAsync(wrong.models.list(), { instanceOf: OpenAI.AuthenticationError });
  await t.throwsAsync(
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'y'.repeat(70_000) }] }),
    { instanceOf: OpenAI.APIError, message: /413/ },
  );
  // Still serving.
  const ok = await client.chat.completions.create({ model: MODEL, messages: prompt, temperature: 0, max_tokens: 5 });
  t.is(ok.choices.length, 1);
});

test('random bodies and paths never crash the server: every one gets a 4xx OpenAI error object', async (t) => {
  const fc = (await import('fast-check')).default;
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.jsonValue().map((v) => JSON.stringify(v)),
        fc.string(),
        fc
          .record({
            model: fc.constant(MODEL),
            messages: fc.array(
              fc.record({
                role: fc.constantFrom('user', 'assistant', 'tool', 'system', 'x'),
                content: fc.oneof(fc.string(), fc.constant(null), fc.integer()),
              }),
              { maxLength: 3 },
            ),
            max_tokens: fc.integer({ min: -2, max: 4 }),
          })
          .map((v) => JSON.stringify(v)),
      ),
      fc.constantFrom('/chat/completions', '/models/%E0%A4%A', '/models/x', '/nope'),
      async (body, path) => {
        const res = await raw(path, { method: 'POST', body });
        const json = (await res.json()) as any;
        if (res.status === 200) return Array.isArray(json.choices);
        return res.status >= 400 && res.status < 500 && typeof json.error?.message === 'string';
      },
    ),
    { numRuns: 60 },
  );
  const ok = await client.chat.completions.create({ model: MODEL, messages: prompt, temperature: 0, max_tokens: 3 });
  t.is(ok.choices.length, 1);
});

/** A request with headers fetch() will not send (Host, Origin), straight through node:http. */
function send(
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; json: any; ms: number }> {
  const url = new URL(server.url + path);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: body === undefined ? 'GET' : 'POST', headers },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, json: JSON.parse(text), ms: performance.now() - started }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('DNS rebinding and cross-site requests are refused; the Bearer scheme is case-insensitive', async (t) => {
  const auth = { authorization: `Bearer ${KEY}` };
  const body = JSON.stringify({ model: MODEL, messages: prompt, max_tokens: 2 });
  const rebound = await send('/models', { ...auth, host: 'attacker.example:8000' });
  t.is(rebound.status, 421);
  t.is(rebound.json.error.code, 'misdirected_request');
  const host = new URL(server.url).host;
  const crossSite = await send(
    '/chat/completions',
    { ...auth, host, origin: 'http://evil.example', 'content-type': 'text/plain' },
    body,
  );
  t.is(crossSite.status, 403);
  t.is(crossSite.json.error.code, 'cross_origin');
  t.is((await send('/models', { ...auth, host: `localhost:${new URL(server.url).port}` })).status, 200);
  t.is((await send('/models', { ...auth, host, origin: `http://${host}` })).status, 200);
  for (const scheme of ['bearer', 'BEARER', 'Bearer  ']) {
    t.is((await send('/models', { host, authorization: `${scheme} ${KEY}` })).status, 200, scheme);
  }
  t.is((await send('/models', { host, authorization: `Basic ${KEY}` })).status, 401);
  t.throws(() => new ChatServer({ policy: {} as never, modelName: 'x', apiKey: '' }), {
    instanceOf: UsageError,
    message: /API key is empty/,
  });
});

test('a prompt that cannot fit the context is refused before it is tokenized; other requests are not held up', async (t) => {
  const host = new URL(server.url).host;
  const headers = { host, authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  // Just under the 64 KiB body limit, each far over the context in bytes alone.
  const big = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'ab'.repeat(30_000) }] });
  const started = performance.now();
  const answers = await Promise.all([
    ...Array.from({ length: 8 }, () => send('/chat/completions', headers, big)),
    send('/models', headers),
  ]);
  for (const a of answers.slice(0, 8)) {
    t.is(a.status, 400);
    t.is(a.json.error.code, 'context_length_exceeded');
    t.regex(a.json.error.message, /at least \d+ tokens; this model's context is 1024 tokens/);
  }
  t.is(answers[8]!.status, 200);
  // Tokenizing 8 × 60 kB would take seconds here; refusing them from their byte counts takes milliseconds.
  t.true(performance.now() - started < 2000, `${performance.now() - started} ms`);
});
