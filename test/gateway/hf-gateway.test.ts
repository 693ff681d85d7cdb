import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import OpenAI from 'openai';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { Gateway, policyAnswerer } from '../../src/gateway/gateway.ts';
import { checkAgentRecord } from '../../src/gateway/replay-agent.ts';
import { canonicalTools, chatFormatFor } from '../../src/openai/chat-format.ts';
import { EPISODE_HEADER } from '../../src/openai/episode-gateway.ts';
import { ChatServer } from '../../src/openai/server.ts';
import { loadHfPolicy, type HfPolicy } from '../../src/policy/hf/hf-policy.ts';
import { buildTrajectories } from '../../src/policy/trajectory.ts';
import { sealRecord, serializeRecord } from '../../src/record/record.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// The gateway in front of a Hugging Face model (a random Qwen3 at a small shape, Qwen3's real
// tokenizer and chat template): the tools go into the template, every turn's prompt ids are the
// template's rendering, and earlier answers come back as their sampled ids.

let root: string;
let policy: HfPolicy;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-gateway-'));
  const dir = join(root, 'qwen3');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 48,
    seed: 5,
  });
  policy = await loadHfPolicy(dir);
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A recording gateway in front of the Qwen3 model on a loopback port: `run` gets its URL and the records it seals. */
async function withGateway(runId: string, run: (url: string, records: EpisodeRecord[]) => Promise<void>) {
  const records: EpisodeRecord[] = [];
  const gateway = new Gateway({
    answerer: policyAnswerer(policy, 'qwen'),
    modelName: 'qwen',
    runId,
    agent: { id: 'agent', version: 'test', options: {} },
    openOnRequest: true,
    onRecord: (r) => void records.push(r),
  });
  const server = new ChatServer({ gateway });
  try {
    await run(await server.listen(0, '127.0.0.1'), records);
  } finally {
    await server.close();
    await gateway.close();
  }
}

const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'lookup',
      description: 'Look a word up.',
      parameters: { type: 'object', properties: { word: { type: 'string' } } },
    },
  },
];

test('a Qwen3 model behind the gateway: three turns recorded, each prompt the template rendering of its request', async (t) => {
  await withGateway('hf', async (url, records) => {
    const client = new OpenAI({
      baseURL: url,
      apiKey: 'x',
      maxRetries: 0,
      defaultHeaders: { [EPISODE_HEADER]: 'q-1' },
    });
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You look words up.' },
      { role: 'user', content: 'What does “ubiquitous” mean? 😀' },
    ];
    for (let turn = 0; turn < 3; turn++) {
      const answer = await client.chat.completions.create({
        model: 'qwen',
        messages,
        tools: TOOLS,
        max_tokens: 5,
        temperature: 1,
        seed: turn,
      });
      messages.push(answer.choices[0]!.message, { role: 'user', content: `And again, ${turn}?` });
    }
    const reward = await fetch(`${url}/episodes/q-1/reward`, { method: 'POST', body: JSON.stringify({ reward: 0.5 }) });
    t.is(reward.status, 200);
    const [record] = records;
    t.is(record!.turns.length, 3);
    t.is(checkAgentRecord(record!, chatFormatFor(policy)), undefined);
    // The first prompt is the template with the tools (as canonical JSON, as the record keeps them),
    // as the model's own encoder renders it.
    t.deepEqual(record!.promptTokens, policy.encode.prompt(record!.prompt, canonicalTools(TOOLS) as typeof TOOLS));
    const { sequences, skipped } = buildTrajectories([record!]);
    t.deepEqual(skipped, []);
    t.is(
      sequences.reduce((n, s) => n + s.mask.reduce((a, b) => a + b, 0), 0),
      record!.turns.reduce((n, turn) => n + turn.tokens!.length, 0),
      'the loss is on every sampled id, once',
    );
  });
});

test('messages as real clients send them reach a Qwen3 template: content null beside tool_calls, text parts, developer, names; forced tool choices and images are 400s', async (t) => {
  await withGateway('hf-clients', async (url, records) => {
    const client = new OpenAI({
      baseURL: url,
      apiKey: 'x',
      maxRetries: 0,
      defaultHeaders: { [EPISODE_HEADER]: 'c-1' },
    });
    // What the openai package sends back after a tool call: the assistant's content null, its calls,
    // then one tool message per call (Qwen3's template tests `'</think>' in message.content`).
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'developer', content: 'You look words up.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What does ' },
          { type: 'text', text: '“ubiquitous” mean?' },
        ],
        name: 'ann',
      },
    ];
    for (let turn = 0; turn < 3; turn++) {
      const answer = await client.chat.completions.create({
        model: 'qwen',
        messages,
        tools: TOOLS,
        max_tokens: 4,
        seed: turn,
      });
      t.is(answer.choices.length, 1);
      messages.push(
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: `call_${turn}`, type: 'function', function: { name: 'lookup', arguments: `{"word":"w${turn}"}` } },
          ],
        },
        { role: 'tool', tool_call_id: `call_${turn}`, content: [{ type: 'text', text: `meaning ${turn}` }] },
      );
    }
    // A streamed turn of the same conversation.
    const stream = await client.chat.completions.create({
      model: 'qwen',
      messages,
      tools: TOOLS,
      max_tokens: 3,
      stream: true,
    });
    for await (const _ of stream);
    const refused = async (body: object) => {
      const response = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [EPISODE_HEADER]: 'c-1' },
        body: JSON.stringify({ model: 'qwen', messages, tools: TOOLS, ...body }),
      });
      return {
        status: response.status,
        message: ((await response.json()) as { error: { message: string } }).error.message,
      };
    };
    const required = await refused({ tool_choice: 'required' });
    t.is(required.status, 400);
    t.regex(required.message, /"required" is not supported: this server does not constrain decoding/);
    const named = await refused({ tool_choice: { type: 'function', function: { name: 'lookup' } } });
    t.regex(named.message, /a named function \("lookup"\) is not supported/);
    const image = await refused({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }],
    });
    t.is(image.status, 400);
    t.regex(image.message, /a content part of type "image_url" is not supported/);
    t.is(
      (await fetch(`${url}/episodes/c-1/reward`, { method: 'POST', body: JSON.stringify({ reward: 1 }) })).status,
      200,
    );
    const [record] = records;
    t.is(record!.turns.length, 4, 'the refused requests are not turns');
    const format = chatFormatFor(policy);
    t.is(checkAgentRecord(record!, format), undefined);
    // The record keeps what the client sent: the assistant's null content, the user's name.
    const request = (record!.turns[1]!.info as { request: { messages?: unknown } }).request;
    t.true(JSON.stringify(request).includes('"content":null'));
    t.true(JSON.stringify(record!.turns[0]!.info).includes('"name":"ann"'));
    // Sampled ids edited and resealed: the checksum holds, the re-check against the text does not.
    const edited = structuredClone(record!) as EpisodeRecord;
    const tokens = edited.turns[0]!.tokens!;
    tokens[0] = tokens[0] === 13 ? 14 : 13;
    const divergence = checkAgentRecord(sealRecord(edited), format);
    t.is(divergence?.turn, 0);
    t.is(divergence?.field, 'tokens (decoded)');
  });
});

test('replay --policy hf:DIR checks a record whose tools the client wrote in any key order', async (t) => {
  await withGateway('hf-order', async (url, records) => {
    // "type" before "function", "properties" before "type": not the canonical order the record keeps.
    const tools = [
      {
        type: 'function',
        function: {
          parameters: { properties: { word: { type: 'string' } }, type: 'object' },
          name: 'lookup',
          description: 'Look a word up.',
        },
      },
    ];
    for (let turn = 0; turn < 2; turn++) {
      const response = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [EPISODE_HEADER]: 'o-1' },
        body: JSON.stringify({
          model: 'qwen',
          messages: [{ role: 'user', content: `Word ${turn}?` }],
          tools,
          max_tokens: 3,
        }),
      });
      t.is(response.status, 200);
    }
    await fetch(`${url}/episodes/o-1/reward`, { method: 'POST', body: JSON.stringify({ reward: 0 }) });
    const [record] = records;
    const reread = JSON.parse(serializeRecord(record!)) as EpisodeRecord;
    t.is(checkAgentRecord(reread, chatFormatFor(policy)), undefined);
  });
});
