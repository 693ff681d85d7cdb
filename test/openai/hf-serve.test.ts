import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { canonicalTools, chatFormatFor } from '../../src/openai/chat-format.ts';
import { ChatServer } from '../../src/openai/server.ts';
import type { AssistantMessage, OpenAIMessage } from '../../src/openai/wire.ts';
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
