import test from 'ava';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { canonicalTools, chatFormatFor } from '../../src/openai/chat-format.ts';
import { ChatServer } from '../../src/openai/server.ts';
import {
  MAX_REQUEST_MESSAGES,
  MAX_REQUEST_TOOLS,
  type AssistantMessage,
  type OpenAIMessage,
} from '../../src/openai/wire.ts';
import { TEMPLATE_DEADLINE_MS } from '../../src/hf/chat-template.ts';
import { loadHfPolicy, type HfPolicy } from '../../src/policy/hf/hf-policy.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

let root: string;
let policy: HfPolicy;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-serve-'));
  const dir = join(root, 'qwen3');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 48,
    seed: 4,
  });
  policy = await loadHfPolicy(dir);
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'add',
      description: 'Add two numbers.',
      parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
    },
  },
];

test('serve hf:DIR: the OpenAI client gets completions whose prompt is the template with the tools, and an answer it sends back is the ids sampled for it', async (t) => {
  const server = new ChatServer({ policy, modelName: 'tiny' });
  const client = new OpenAI({ baseURL: await server.listen(0), apiKey: 'unused' });
  try {
    const first: OpenAIMessage[] = [{ role: 'user', content: 'Add 2 and 3 😀' }];
    const a = await client.chat.completions.create({
      model: 'tiny',
      messages: first,
      tools: TOOLS,
      max_tokens: 6,
      temperature: 0,
    });
    const rendered = policy.encode.prompt(
      [{ role: 'user', content: 'Add 2 and 3 😀' }],
      canonicalTools(TOOLS) as typeof TOOLS,
    );
    t.is(a.usage!.prompt_tokens, rendered.length);
    const sampled = (a.choices[0] as unknown as { token_ids: number[] }).token_ids;
    t.is(sampled.length, 6);
    const reply = a.choices[0]!.message;
    const followUp: OpenAIMessage[] = [
      ...first,
      { role: 'assistant', content: reply.content },
      { role: 'user', content: 'Again.' },
    ];
    const b = await client.chat.completions.create({
      model: 'tiny',
      messages: followUp,
      tools: TOOLS,
      max_tokens: 3,
      temperature: 0,
    });
    // What the server was shown: the first prompt, the sampled ids as sampled, then the template's text.
    const ids = chatFormatFor(policy).prompt(followUp, TOOLS, Infinity);
    t.deepEqual(ids.slice(0, rendered.length), rendered);
    t.deepEqual(ids.slice(rendered.length, rendered.length + sampled.length), sampled);
    t.is(b.usage!.prompt_tokens, ids.length);
    // Streaming gives the same text.
    const stream = await client.chat.completions.create({
      model: 'tiny',
      messages: first,
      tools: TOOLS,
      max_tokens: 6,
      temperature: 0,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    t.is(text, reply.content ?? '');
  } finally {
    await server.close();
  }
});

test("an answer in the model's own tool-call syntax comes back as OpenAI tool_calls; text without one as content", (t) => {
  const format = chatFormatFor(policy);
  const callId = (i: number) => `call_${i}`;
  const calls = format.answer(
    'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 1}}\n</tool_call>',
    true,
    callId,
  );
  t.true(calls.calls);
  t.deepEqual(calls.message as AssistantMessage, {
    role: 'assistant',
    content: 'Let me add.',
    tool_calls: [
      { id: 'call_0', type: 'function', function: { name: 'add', arguments: '{"a":2,"b":3}' } },
      { id: 'call_1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":1}' } },
    ],
  });
  t.deepEqual(format.answer('It is 5.', true, callId), {
    message: { role: 'assistant', content: 'It is 5.' },
    calls: false,
  });
  // Without tools in the request, a call stays text (as the OpenAI API does).
  t.false(format.answer('<tool_call>\n{"name": "add", "arguments": {}}\n</tool_call>', false, callId).calls);
});

/**
 * POSTs a chat completion request as raw JSON (the openai client would refuse some of these itself),
 * on a connection of its own: a kept-alive one may be closed by the server as it is reused, on a busy machine.
 */
function post(url: string, body: object): Promise<{ status: number; error: { message: string; code: string } }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/chat/completions`,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, error: JSON.parse(text).error }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

test('a request over MAX_REQUEST_TOOLS tools or MAX_REQUEST_MESSAGES messages is a 400 naming the limit, and the server goes on', async (t) => {
  const server = new ChatServer({ policy, modelName: 'tiny' });
  const url = await server.listen(0);
  try {
    const tools = Array.from({ length: MAX_REQUEST_TOOLS + 1 }, (_, i) => ({
      type: 'function',
      function: { name: `f${i}`, parameters: { type: 'object' } },
    }));
    const manyTools = await post(url, { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], tools });
    t.is(manyTools.status, 400);
    t.regex(manyTools.error.message, /1025 tools: a request holds at most 1024 \(MAX_REQUEST_TOOLS\)/);
    const messages = Array.from({ length: 100_001 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'h' }));
    const manyMessages = await post(url, { model: 'tiny', messages });
    t.is(manyMessages.status, 400);
    t.regex(manyMessages.error.message, /100001 messages: a request holds at most 4096 \(MAX_REQUEST_MESSAGES\)/);
    const ok = await post(url, { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    t.is(ok.status, 200);
  } finally {
    await server.close();
  }
});

test('a prompt of hundreds of thousands of ids is refused as over the context (a 400), not a stack overflow (a 500)', async (t) => {
  const server = new ChatServer({ policy, modelName: 'tiny' });
  const url = await server.listen(0);
  try {
    // Within the limits, but the tools render to ~200,000 ids: once spread as push() arguments, too many.
    const tools = Array.from({ length: MAX_REQUEST_TOOLS }, (_, i) => ({
      type: 'function',
      function: { name: `f${i}`, description: 'an ordinary tool. '.repeat(40), parameters: { type: 'object' } },
    }));
    const r = await post(url, { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], tools });
    t.is(r.status, 400, r.error.message);
    t.is(r.error.code, 'context_length_exceeded');
    t.regex(r.error.message, /the conversation is at least \d{6} tokens; this model's context is 4096 tokens/);
  } finally {
    await server.close();
  }
});

test('a template quadratic in the messages is stopped at its budget: a 400 naming it, in about a second, and the server goes on', async (t) => {
  const quadratic = join(root, 'quadratic');
  await cp(join(root, 'qwen3'), quadratic, { recursive: true });
  await writeFile(
    join(quadratic, 'chat_template.jinja'),
    "{% if messages[0].content == 'refuse' %}{{ raise_exception('this template refuses') }}{% endif %}{% for m in messages %}{% for n in messages %}{% endfor %}{{ m.content }}\n{% endfor %}",
  );
  const server = new ChatServer({ policy: await loadHfPolicy(quadratic), modelName: 'tiny' });
  const url = await server.listen(0);
  try {
    const messages = Array.from({ length: MAX_REQUEST_MESSAGES }, (_, i) => ({ role: 'user', content: `m${i}` }));
    const started = performance.now();
    const r = await post(url, { model: 'tiny', messages, max_tokens: 1 });
    t.true(performance.now() - started < TEMPLATE_DEADLINE_MS + 2000);
    t.is(r.status, 400);
    t.is(r.error.code, 'template_budget_exceeded');
    t.regex(r.error.message, /chat_template\.jinja ran past its budget of \d+ (operations|milliseconds)/);
    const ok = await post(url, { model: 'tiny', messages: messages.slice(0, 10), max_tokens: 1 });
    t.is(ok.status, 200);
    // A template that raises is a 400 with its message too (it refused these messages).
    const refused = await post(url, { model: 'tiny', messages: [{ role: 'user', content: 'refuse' }] });
    t.is(refused.status, 400);
    t.is(refused.error.code, 'chat_template_error');
    t.regex(refused.error.message, /this template refuses/);
  } finally {
    await server.close();
  }
});
