import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import OpenAI from 'openai';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { Gateway, policyAnswerer } from '../../src/gateway/gateway.ts';
import { checkAgentRecord } from '../../src/gateway/replay-agent.ts';
import { chatFormatFor } from '../../src/openai/chat-format.ts';
import { EPISODE_HEADER } from '../../src/openai/episode-gateway.ts';
import { ChatServer } from '../../src/openai/server.ts';
import { loadHfPolicy, type HfPolicy } from '../../src/policy/hf/hf-policy.ts';
import { buildTrajectories } from '../../src/policy/trajectory.ts';
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
  const records: EpisodeRecord[] = [];
  const gateway = new Gateway({
    answerer: policyAnswerer(policy, 'qwen'),
    modelName: 'qwen',
    runId: 'hf',
    agent: { id: 'agent', version: 'test', options: {} },
    openOnRequest: true,
    onRecord: (r) => void records.push(r),
  });
  const server = new ChatServer({ gateway });
  const url = await server.listen(0, '127.0.0.1');
  try {
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
    // The first prompt is the template with the tools, as the model's own encoder renders it.
    t.deepEqual(record!.promptTokens, policy.encode.prompt(record!.prompt, TOOLS));
    const { sequences, skipped } = buildTrajectories([record!]);
    t.deepEqual(skipped, []);
    t.is(
      sequences.reduce((n, s) => n + s.mask.reduce((a, b) => a + b, 0), 0),
      record!.turns.reduce((n, turn) => n + turn.tokens!.length, 0),
      'the loss is on every sampled id, once',
    );
  } finally {
    await server.close();
    await gateway.close();
  }
});
