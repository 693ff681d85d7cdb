import test from 'ava';
import OpenAI, { type APIError } from 'openai';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { checkAgentRecord } from '../../src/gateway/replay-agent.ts';
import { Gateway, policyAnswerer } from '../../src/gateway/gateway.ts';
import { EPISODE_HEADER } from '../../src/openai/episode-gateway.ts';
import { chatFormatFor } from '../../src/openai/chat-format.ts';
import { ChatServer, type RequestLogEntry } from '../../src/openai/server.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import { buildTrajectories } from '../../src/policy/trajectory.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { parseRecordLine, serializeRecord } from '../../src/record/record.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import type { Task } from '../../src/core/types.ts';

const MODEL = 'calc-tiny';
let policy: ServablePolicy;
const task = (calc.tasks({ split: 'train', seed: 0, count: 1 }) as Task[])[0]!;
const tools = openAITools(calc) as OpenAI.ChatCompletionTool[];
const prompt = calc.env.prompt(task, openAITools(calc)) as OpenAI.ChatCompletionMessageParam[];

test.before(async () => {
  const { dir } = await calculatorCheckpoint();
  policy = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
});

/** A recording gateway behind its HTTP server, its records collected. */
async function recording(options: { idleTimeoutMs?: number; maxTurns?: number } = {}) {
  const records: EpisodeRecord[] = [];
  const gateway = new Gateway({
    answerer: policyAnswerer(policy, MODEL),
    modelName: MODEL,
    runId: 'test',
    agent: { id: 'agent', version: 'test', options: {} },
    openOnRequest: true,
    onRecord: (r) => void records.push(r),
    ...options,
  });
  const server = new ChatServer({ gateway });
  await server.listen(0, '127.0.0.1');
  const client = (episode: string) =>
    new OpenAI({ apiKey: 'none', baseURL: server.url, maxRetries: 0, defaultHeaders: { [EPISODE_HEADER]: episode } });
  const reward = (episode: string, body: unknown) =>
    fetch(`${server.url}/episodes/${encodeURIComponent(episode)}/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const close = async () => {
    await server.close();
    await gateway.close();
  };
  return { gateway, server, records, client, reward, close };
}

/** Two turns the way an agent loop sends them: the call, its result, the answer. */
async function twoTurns(client: OpenAI, edit: (m: OpenAI.ChatCompletionMessage) => object = (m) => m) {
  const first = await client.chat.completions.create({
    model: MODEL,
    messages: prompt,
    tools,
    temperature: 0,
    max_tokens: 40,
  });
  const message = first.choices[0]!.message;
  const call = message.tool_calls![0]!;
  const second = await client.chat.completions.create({
    model: MODEL,
    messages: [
      ...prompt,
      edit(message) as OpenAI.ChatCompletionMessageParam,
      { role: 'tool', tool_call_id: call.id, content: task.answer! },
    ],
    tools,
    temperature: 0,
    max_tokens: 40,
  });
  return { first, second };
}

test('an episode is recorded turn by turn and closed by its reward into one sealed, trainable record', async (t) => {
  const g = await recording();
  try {
    const { first, second } = await twoTurns(g.client('ep-1'));
    const res = await g.reward('ep-1', { reward: 1, success: true, processRewards: [0.1] });
    t.is(res.status, 200);
    const body = (await res.json()) as { episode_id: string; index: number; turns: number; checksum: string };
    t.like(body, { episode_id: 'ep-1', index: 0, turns: 2 });
    t.is(g.records.length, 1);
    const record = g.records[0]!;
    // The line parses back with its checksum: the record every other command reads.
    t.deepEqual(parseRecordLine(serializeRecord(record)), record);
    t.is(record.checksum, body.checksum);
    t.is(record.scenario.id, 'agent');
    t.is(record.task.question, task.question);
    t.deepEqual(record.prompt, prompt);
    t.is(record.turns.length, 2);
    // The sampled ids are what the server returned; the next prompt extends prompt + answer (concatenated).
    t.deepEqual(record.turns[0]!.tokens, (first.choices[0] as { token_ids?: number[] }).token_ids);
    t.deepEqual(record.turns[1]!.tokens, (second.choices[0] as { token_ids?: number[] }).token_ids);
    t.is(record.turns[0]!.logprobs!.length, record.turns[0]!.tokens!.length);
    t.is(record.turns[0]!.observation, task.answer!);
    t.true(record.turns[0]!.observationTokens!.length > 0);
    t.is(record.turns[1]!.context, undefined);
    t.is(
      record.promptTokens!.length + record.turns[0]!.tokens!.length + record.turns[0]!.observationTokens!.length,
      second.usage!.prompt_tokens,
    );
    t.like(record.outcome, { reward: 1, success: true });
    t.is(record.totalReward, 1.1);
    t.is(record.turns[0]!.reward, 0.1);
    // Each turn's prompt ids are the template's rendering of its request (the first answer as its ids).
    t.is(checkAgentRecord(record, chatFormatFor(policy)), undefined);
    const { sequences, skipped } = buildTrajectories([record]);
    t.deepEqual(skipped, []);
    t.is(
      sequences[0]!.mask.reduce((a, b) => a + b, 0),
      record.totalTokens,
    );
  } finally {
    await g.close();
  }
});

test('an earlier answer sent back reformatted (other spacing, other call id) still goes in as its sampled ids', async (t) => {
  const g = await recording();
  try {
    await twoTurns(g.client('ep-2'), (m) => ({
      role: 'assistant',
      content: '',
      tool_calls: m.tool_calls!.map((c) => ({
        ...c,
        function: {
          ...(c as OpenAI.ChatCompletionMessageFunctionToolCall).function,
          arguments: JSON.stringify(
            JSON.parse((c as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments),
            null,
            2,
          ),
        },
      })),
    }));
    await g.reward('ep-2', { reward: 0 });
    const record = g.records[0]!;
    t.is(record.turns[1]!.context, undefined, 'the history concatenates: no re-tokenized answer');
    t.is(checkAgentRecord(record, chatFormatFor(policy)), undefined);
  } finally {
    await g.close();
  }
});

test('an agent that rewrites its history gets step-level turns: each step keeps what it was shown', async (t) => {
  const g = await recording();
  try {
    const client = g.client('ep-3');
    await client.chat.completions.create({ model: MODEL, messages: prompt, tools, temperature: 0, max_tokens: 40 });
    // The agent drops the first exchange and asks afresh with a note of its own.
    const rewritten: OpenAI.ChatCompletionMessageParam[] = [
      prompt[0]!,
      { role: 'user', content: `${task.question} (The result so far is ${task.answer}.)` },
    ];
    await client.chat.completions.create({ model: MODEL, messages: rewritten, tools, temperature: 0, max_tokens: 40 });
    await g.reward('ep-3', { reward: 0.5 });
    const record = g.records[0]!;
    t.truthy(record.turns[1]!.context, 'the second step stores what it was shown');
    t.deepEqual(record.turns[0]!.observationTokens, []);
    t.is(checkAgentRecord(record, chatFormatFor(policy)), undefined);
    const { sequences } = buildTrajectories([record]);
    t.is(sequences.length, 2, 'one training sequence per step');
  } finally {
    await g.close();
  }
});

test('streamed turns are recorded as plain ones are', async (t) => {
  const g = await recording();
  try {
    const stream = await g.client('ep-s').chat.completions.create({
      model: MODEL,
      messages: prompt,
      tools,
      temperature: 0,
      max_tokens: 40,
      stream: true,
    });
    let args = '';
    for await (const chunk of stream)
      for (const c of chunk.choices[0]?.delta.tool_calls ?? []) args += c.function?.arguments ?? '';
    t.true(args.length > 0);
    await g.reward('ep-s', { reward: 0 });
    t.is(g.records[0]!.turns.length, 1);
    t.deepEqual(g.records[0]!.turns[0]!.action, {
      kind: 'tool_calls',
      calls: [{ name: 'calculate', arguments: JSON.parse(args) }],
    });
  } finally {
    await g.close();
  }
});

test('bad rewards and episode ids are refused with what is wrong, and nothing recorded is lost', async (t) => {
  const g = await recording({ maxTurns: 1 });
  try {
    const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;
    const unknown = await g.reward('never-seen', { reward: 1 });
    t.is(unknown.status, 404);
    t.is((await errorOf(unknown)).code, 'unknown_episode');
    const badId = await g.reward('has space', { reward: 1 });
    t.is(badId.status, 400);
    t.is((await errorOf(badId)).code, 'invalid_episode_id');

    const client = g.client('ep-4');
    await client.chat.completions.create({ model: MODEL, messages: prompt, tools, temperature: 0, max_tokens: 8 });
    // One turn is this gateway's limit.
    const over = await client.chat.completions
      .create({ model: MODEL, messages: prompt, tools, temperature: 0, max_tokens: 8 })
      .catch((e: unknown) => e as APIError);
    t.is((over as APIError).status, 400);
    t.is((over as APIError).code, 'too_many_turns');
    for (const [body, why] of [
      ['{"reward": 1e999}', /Infinity/],
      [{ reward: 'one' }, /reward/],
      [{ reward: 1, extra: true }, /extra/],
      [{ reward: 1, processRewards: [0, 0] }, /2 process rewards for 1 turns/],
      ['not json', /not valid JSON/],
    ] as const) {
      const res = await g.reward('ep-4', body);
      t.is(res.status, 400, String(body));
      t.regex((await errorOf(res)).message, why);
    }
    t.is(g.records.length, 0, 'a refused reward closes nothing');
    t.is((await g.reward('ep-4', { reward: 1 })).status, 200);
    const twice = await g.reward('ep-4', { reward: 1 });
    t.is(twice.status, 409);
    t.is((await errorOf(twice)).code, 'episode_closed');
    const late = await client.chat.completions
      .create({ model: MODEL, messages: prompt, tools, temperature: 0, max_tokens: 8 })
      .catch((e: unknown) => e as APIError);
    t.is((late as APIError).status, 409);
    t.is(g.records.length, 1);
  } finally {
    await g.close();
  }
});

test('an episode never closed is written as unfinished after its idle timeout, its turns kept; the rest at shutdown', async (t) => {
  const g = await recording({ idleTimeoutMs: 300 });
  try {
    await g
      .client('ep-idle')
      .chat.completions.create({ model: MODEL, messages: prompt, tools, temperature: 0, max_tokens: 8 });
    await new Promise((r) => setTimeout(r, 800));
    t.is(g.records.length, 1);
    t.like(g.records[0]!, { status: 'error', endReason: 'error', episodeId: 'ep-idle' });
    t.regex(g.records[0]!.error!, /unfinished: no reward was posted within 0.3 s/);
    t.is(g.records[0]!.turns.length, 1);
  } finally {
    await g.close();
  }
  const h = await recording();
  await h
    .client('ep-open')
    .chat.completions.create({ model: MODEL, messages: prompt, tools, temperature: 0, max_tokens: 8 });
  await h.close();
  t.is(h.records.length, 1);
  t.regex(h.records[0]!.error!, /the gateway stopped before a reward was posted/);
});

test('a server that does not record refuses the episode header instead of ignoring it', async (t) => {
  const server = new ChatServer({ policy, modelName: MODEL });
  await server.listen(0, '127.0.0.1');
  try {
    const client = new OpenAI({
      apiKey: 'none',
      baseURL: server.url,
      maxRetries: 0,
      defaultHeaders: { [EPISODE_HEADER]: 'x' },
    });
    const error = await client.chat.completions
      .create({ model: MODEL, messages: prompt, max_tokens: 4 })
      .catch((e: unknown) => e as APIError);
    t.is((error as APIError).status, 400);
    t.regex((error as APIError).message, /--record DIR/);
    const reward = await fetch(`${server.url}/episodes/x/reward`, { method: 'POST', body: '{"reward":1}' });
    t.is(reward.status, 404);
  } finally {
    await server.close();
  }
});

test('a gateway with no model yet answers 503; a record that cannot be written leaves its episode open for the reward again', async (t) => {
  let failing = true;
  const records: EpisodeRecord[] = [];
  const gateway = new Gateway({
    modelName: MODEL,
    runId: 'test',
    agent: { id: 'agent', version: 'test', options: {} },
    openOnRequest: true,
    onRecord: (r) => {
      if (failing) throw new Error('ENOSPC: no space left on device');
      records.push(r);
    },
  });
  const logged: RequestLogEntry[] = [];
  const server = new ChatServer({ gateway, onRequest: (e) => logged.push(e) });
  await server.listen(0, '127.0.0.1');
  try {
    const client = new OpenAI({
      apiKey: 'x',
      baseURL: server.url,
      maxRetries: 0,
      defaultHeaders: { [EPISODE_HEADER]: 'w' },
    });
    const early = await client.chat.completions
      .create({ model: MODEL, messages: prompt, max_tokens: 4 })
      .catch((e: unknown) => e);
    t.is((early as APIError).status, 503);
    t.regex((early as APIError).message, /no model is served yet/);
    gateway.setAnswerer(policyAnswerer(policy, MODEL));
    await client.chat.completions.create({ model: MODEL, messages: prompt, max_tokens: 4 });
    const post = () => fetch(`${server.url}/episodes/w/reward`, { method: 'POST', body: '{"reward": 1}' });
    const failed = await post();
    t.is(failed.status, 500);
    // The client hears that the server failed; why (which may name its files) goes to its log.
    t.is(
      ((await failed.json()) as { error: { message: string } }).error.message,
      "internal error; the server's log says why",
    );
    t.like(logged.at(-1), { path: '/v1/episodes/w/reward', status: 500, error: 'ENOSPC: no space left on device' });
    failing = false;
    t.is((await post()).status, 200);
    t.is(records.length, 1);
    t.is(records[0]!.turns.length, 1);
  } finally {
    await server.close();
    await gateway.close();
  }
});
