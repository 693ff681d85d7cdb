import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { Task } from '../../src/core/types.ts';
import { runRolloutCommand } from '../../src/cli/commands/rollout.ts';
import { ExternalPolicyError, PolicySpecError } from '../../src/openai/errors.ts';
import { OpenAIPolicy, openAIOptionsFromSpec } from '../../src/openai/external-policy.ts';
import { ChatServer } from '../../src/openai/server.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import { resolvePolicy } from '../../src/app/resolve-policy.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { loadRecords } from '../../src/record/jsonl.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { calc, calculatorCheckpoint } from './fixtures.ts';

const task = (calc.tasks({ split: 'train', seed: 0, count: 1 }) as Task[])[0]!;

/** A local OpenAI-compatible endpoint whose answers the test scripts; it notes every request body. */
async function fakeEndpoint(
  answer: (body: any, n: number, req: IncomingMessage, res: ServerResponse) => void | Promise<void>,
) {
  const bodies: any[] = [];
  let requests = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const server: Server = createServer(async (req, res) => {
    requests++;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    bodies.push({ body, auth: req.headers.authorization });
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      await answer(body, bodies.length, req, res);
    } finally {
      inFlight--;
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return {
    url,
    bodies,
    /** Requests that reached the server (counted on arrival, before their body is read). */
    requests: () => requests,
    maxInFlight: () => maxInFlight,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const reply = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const completion = (message: object, extra: object = {}) => ({
  id: 'x',
  object: 'chat.completion',
  created: 0,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop', ...extra }],
});

test('eval through `serve` (openai:NAME@URL) gives the same actions and success as ckpt: on the same seed, greedy', async (t) => {
  const { dir } = await calculatorCheckpoint();
  const policy = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
  const server = new ChatServer({ policy, modelName: 'calc-tiny' });
  const url = await server.listen(0);
  try {
    const flags = {
      scenario: 'calculator',
      split: 'train',
      episodes: 6,
      seed: 3,
      group: 1,
      concurrency: 6,
      workers: 0,
      maxBatch: 8,
    };
    const ckptOut = mkdtempSync(join(tmpdir(), 'agent-r1-eval-ckpt-'));
    const apiOut = mkdtempSync(join(tmpdir(), 'agent-r1-eval-api-'));
    const viaCkpt = await runRolloutCommand({ ...flags, policy: `ckpt:${dir}`, out: ckptOut });
    const viaApi = await runRolloutCommand({ ...flags, policy: `openai:calc-tiny@${url}`, out: apiOut });
    const a = (await loadRecords(join(ckptOut, 'episodes.jsonl'))).records;
    const b = (await loadRecords(join(apiOut, 'episodes.jsonl'))).records;
    t.is(a.length, 6);
    t.is(b.length, 6);
    t.is(viaApi.successRate, viaCkpt.successRate);
    const toolTurns = a.flatMap((r) => r.turns).filter((turn) => turn.action.kind === 'tool_calls').length;
    t.true(toolTurns >= 3, `the checkpoint made ${toolTurns} tool calls`);
    a.forEach((ra, i) => {
      const rb = b[i]!;
      t.is(rb.policy.id, `openai:calc-tiny@${url}`);
      t.is(rb.task.id, ra.task.id);
      t.is(rb.outcome.success, ra.outcome.success);
      t.is(rb.endReason, ra.endReason);
      t.deepEqual(
        rb.turns.map((turn) => turn.action),
        ra.turns.map((turn) => turn.action),
      );
      // The server returns the sampled token ids and log-probs, so the record has them too.
      t.deepEqual(
        rb.turns.map((turn) => turn.tokens),
        ra.turns.map((turn) => turn.tokens),
      );
      rb.turns.forEach((turn, k) =>
        t.deepEqual(
          turn.logprobs!.map((x) => x.toFixed(4)),
          ra.turns[k]!.logprobs!.map((x) => x.toFixed(4)),
        ),
      );
    });
    // The records replay with no network (the server is stopped first).
    await server.close();
    for (const record of b) t.true((await replayRecord(record, calc)).verified);
  } finally {
    await server.close().catch(() => {});
  }
});

test('sampling at temperature 1 through the server reproduces the checkpoint policy: the per-turn seed goes over the wire', async (t) => {
  const { dir } = await calculatorCheckpoint();
  const served = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
  const server = new ChatServer({ policy: served, modelName: 'calc-tiny' });
  const url = await server.listen(0);
  try {
    const local = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
    local.sampling = { temperature: 1 };
    const options = { scenario: calc, split: 'train', episodes: 6, seed: 11, config: { maxTokensPerTurn: 24 } };
    const a = (await rollout({ ...options, policy: local })).records;
    const b = (
      await rollout({ ...options, policy: new OpenAIPolicy({ model: 'calc-tiny', baseURL: url, temperature: 1 }) })
    ).records;
    t.deepEqual(
      b.map((r) => r.turns.map((turn) => turn.tokens)),
      a.map((r) => r.turns.map((turn) => turn.tokens)),
    );
    t.deepEqual(
      b.map((r) => r.turns.map((turn) => turn.action)),
      a.map((r) => r.turns.map((turn) => turn.action)),
    );
    // Sampling did change something compared with greedy decoding.
    const greedy = (await rollout({ ...options, policy: (await loadCheckpointPolicy(dir)) as never })).records;
    t.notDeepEqual(
      greedy.map((r) => r.turns.map((turn) => turn.tokens)),
      a.map((r) => r.turns.map((turn) => turn.tokens)),
    );
  } finally {
    await server.close();
  }
});

test('a server that answers 500 twice and then 200 is retried, and the episode completes', async (t) => {
  const endpoint = await fakeEndpoint((_body, n, _req, res) => {
    if (n <= 2) reply(res, 500, { error: { message: 'overloaded', type: 'server_error' } });
    else reply(res, 200, completion({ content: `<answer>${task.answer}</answer>` }));
  });
  try {
    const policy = new OpenAIPolicy({ model: 'm', baseURL: endpoint.url, backoffMs: 5 });
    const record = await runEpisode({ scenario: calc, task, policy, seed: 1 });
    t.is(endpoint.bodies.length, 3);
    t.is(record.status, 'ok');
    t.is(record.endReason, 'answered');
    t.true(record.outcome.success);
  } finally {
    await endpoint.close();
  }
});

test('429 honours Retry-After; a 400 is not retried and ends the episode with an error record', async (t) => {
  let calls = 0;
  const endpoint = await fakeEndpoint((body, _n, _req, res) => {
    calls++;
    if (body.model === 'limited' && calls === 1)
      reply(res, 429, { error: { message: 'slow down' } }, { 'retry-after-ms': '30' });
    else if (body.model === 'limited') reply(res, 200, completion({ content: '<answer>1</answer>' }));
    else reply(res, 400, { error: { message: 'this model does not support tools', type: 'invalid_request_error' } });
  });
  try {
    const started = performance.now();
    const limited = await runEpisode({
      scenario: calc,
      task,
      policy: new OpenAIPolicy({ model: 'limited', baseURL: endpoint.url, backoffMs: 1 }),
      seed: 1,
    });
    t.true(performance.now() - started >= 25);
    t.is(limited.status, 'ok');
    t.is(calls, 2);
    const refused = await runEpisode({
      scenario: calc,
      task,
      policy: new OpenAIPolicy({ model: 'other', baseURL: endpoint.url, backoffMs: 1 }),
      seed: 1,
    });
    t.is(calls, 3);
    t.is(refused.status, 'error');
    t.is(refused.endReason, 'error');
    t.regex(refused.error!, /answered 400: this model does not support tools/);
  } finally {
    await endpoint.close();
  }
});

// Serial: the tests beside it run the tfjs model on this thread, and a long synchronous forward pass
// lets the abort timer fire before the server's side of the same event loop sees the request (timers
// run before I/O), so the server would count one request where two were sent.
test.serial('timeouts and refused connections are retried, then reported with the attempts', async (t) => {
  const endpoint = await fakeEndpoint(() => new Promise(() => {}));
  try {
    // A generous timeout: on a loaded machine a request can take a while to reach the server.
    const policy = new OpenAIPolicy({
      model: 'm',
      baseURL: endpoint.url,
      timeoutMs: 1500,
      maxRetries: 1,
      backoffMs: 1,
    });
    const record = await runEpisode({ scenario: calc, task, policy, seed: 1 });
    t.is(record.status, 'error');
    t.regex(record.error!, /did not answer within 1500 ms \(gave up after 2 attempts\)/);
    t.is(endpoint.requests(), 2);
  } finally {
    await endpoint.close();
  }
  const closed = new OpenAIPolicy({ model: 'm', baseURL: endpoint.url, maxRetries: 1, backoffMs: 1 });
  const err = await t.throwsAsync(
    closed.act({
      episodeId: 'e',
      task,
      tools: [],
      messages: [{ role: 'user', content: 'x' }],
      turn: 0,
      seed: 1,
      maxTokens: 5,
    }),
    { instanceOf: ExternalPolicyError },
  );
  t.regex(err!.message, /gave up after 2 attempts/);
});

test('native tool_calls become Hermes action text; log-probs and the model own messages go back on the next turn; replay needs no network', async (t) => {
  const endpoint = await fakeEndpoint((body, n, _req, res) => {
    if (n === 1) {
      reply(
        res,
        200,
        completion(
          {
            content: null,
            tool_calls: [
              {
                id: 'call_abc',
                type: 'function',
                function: { name: 'calculate', arguments: JSON.stringify({ expression: task.meta!.expression }) },
              },
            ],
          },
          {
            logprobs: {
              content: [
                { token: 'a', logprob: -0.5, bytes: [97], top_logprobs: [] },
                { token: 'b', logprob: -0.25, bytes: [98], top_logprobs: [] },
              ],
            },
          },
        ),
      );
    } else {
      const last = body.messages.at(-1);
      reply(res, 200, completion({ content: `<answer>${last.content}</answer>` }));
    }
  });
  try {
    const policy = new OpenAIPolicy({ model: 'm', baseURL: endpoint.url, apiKey: 'sk-1' });
    const record = await runEpisode({ scenario: calc, task, policy, seed: 7 });
    t.true(record.outcome.success);
    const first = record.turns[0]!;
    t.deepEqual(first.action, {
      kind: 'tool_calls',
      calls: [{ name: 'calculate', arguments: { expression: task.meta!.expression as string } }],
    });
    t.is(
      first.text,
      `<tool_call>{"name": "calculate", "arguments": ${JSON.stringify({ expression: task.meta!.expression })}}</tool_call>`,
    );
    t.deepEqual(first.logprobs, [-0.5, -0.25]);
    t.is(first.tokens, undefined);
    // What was sent: the scenario's tools, the key, the per-turn seed, the model's own tool-call id and a tool result.
    const [one, two] = endpoint.bodies;
    t.is(one.auth, 'Bearer sk-1');
    t.deepEqual(
      one.body.tools.map((x: any) => x.function.name),
      ['calculate'],
    );
    t.is(typeof one.body.seed, 'number');
    t.is(one.body.max_tokens, record.config.maxTokensPerTurn);
    t.deepEqual(two.body.messages.slice(2), [
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_abc',
            type: 'function',
            function: { name: 'calculate', arguments: JSON.stringify({ expression: task.meta!.expression }) },
          },
        ],
      },
      { role: 'tool', content: task.answer, tool_call_id: 'call_abc' },
    ]);
    await endpoint.close();
    t.true((await replayRecord(record, calc)).verified);
  } finally {
    await endpoint.close();
  }
});

test('Hermes text in the content is read as it is; bad arguments stay in the record as the model wrote them', async (t) => {
  const endpoint = await fakeEndpoint((_body, n, _req, res) => {
    if (n === 1) reply(res, 200, completion({ content: 'I am not sure.' }));
    else if (n === 2)
      reply(
        res,
        200,
        completion({
          content: null,
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'calculate', arguments: '{"expression": 1+' } }],
        }),
      );
    else if (n === 3)
      reply(
        res,
        200,
        completion({
          content: `Let me compute.\n<tool_call>{"name": "calculate", "arguments": {"expression": "${task.meta!.expression}"}}</tool_call>`,
        }),
      );
    else reply(res, 200, completion({ content: `<answer>${task.answer}</answer>` }));
  });
  try {
    const record = await runEpisode({
      scenario: calc,
      task,
      policy: new OpenAIPolicy({ model: 'm', baseURL: endpoint.url }),
      seed: 2,
    });
    t.deepEqual(
      record.turns.map((turn) => turn.action.kind),
      ['invalid', 'invalid', 'tool_calls', 'answer'],
    );
    t.is(record.turns[0]!.text, 'I am not sure.');
    t.regex((record.turns[1]!.action as { error: string }).error, /not valid JSON/);
    t.true(record.outcome.success);
    const sent = endpoint.bodies.map((b) => b.body.messages);
    // A format error after plain text goes back as a user message (OpenAI allows tool messages only after tool calls) ...
    t.deepEqual(sent[1].at(-2), { role: 'assistant', content: 'I am not sure.' });
    t.is(sent[1].at(-1).role, 'user');
    t.regex(sent[1].at(-1).content, /^Error:/);
    // ... and after a native call with broken arguments, as that call's tool result, with the arguments as the model wrote them.
    t.is(sent[2].at(-2).tool_calls[0].function.arguments, '{"expression": 1+');
    t.deepEqual(sent[2].at(-1), { role: 'tool', tool_call_id: 'c', content: record.turns[1]!.observation });
    // A model that writes Hermes calls in its content gets its own message back, and the result as a user message.
    t.is(
      sent[3].at(-2).content,
      `Let me compute.\n<tool_call>{"name": "calculate", "arguments": {"expression": "${task.meta!.expression}"}}</tool_call>`,
    );
    t.is(sent[3].at(-2).tool_calls, undefined);
    t.deepEqual(sent[3].at(-1), { role: 'user', content: task.answer });
  } finally {
    await endpoint.close();
  }
});

test('the concurrency limit holds over all episodes', async (t) => {
  const endpoint = await fakeEndpoint(async (_body, _n, _req, res) => {
    await new Promise((r) => setTimeout(r, 20));
    reply(res, 200, completion({ content: '<answer>0</answer>' }));
  });
  try {
    const policy = new OpenAIPolicy({ model: 'm', baseURL: endpoint.url, concurrency: 2 });
    const { records } = await rollout({ scenario: calc, policy, split: 'train', episodes: 8, seed: 0, concurrency: 8 });
    t.is(records.length, 8);
    t.is(endpoint.maxInFlight(), 2);
  } finally {
    await endpoint.close();
  }
});

test('openai:MODEL@URL specs: the key and tuning from the environment; bad specs are clear errors', async (t) => {
  const o = openAIOptionsFromSpec('openai:qwen2.5-7b@http://127.0.0.1:8000/v1', {
    OPENAI_API_KEY: 'sk-env',
    AGENT_R1_OPENAI_TEMPERATURE: '0',
    AGENT_R1_OPENAI_CONCURRENCY: '3',
    AGENT_R1_OPENAI_LOGPROBS: '0',
  });
  t.deepEqual(o, {
    model: 'qwen2.5-7b',
    baseURL: 'http://127.0.0.1:8000/v1',
    apiKey: 'sk-env',
    temperature: 0,
    concurrency: 3,
    logprobs: false,
  });
  t.is(openAIOptionsFromSpec('openai:org/model@name@https://h/v1', {}).model, 'org/model@name');
  t.throws(() => openAIOptionsFromSpec('openai:gpt-4o', {}), {
    instanceOf: PolicySpecError,
    message: /expected openai:MODEL@BASE_URL/,
  });
  t.throws(() => openAIOptionsFromSpec('openai:m@ftp://x', {}), { instanceOf: PolicySpecError });
  t.throws(() => openAIOptionsFromSpec('openai:m@http://x/v1', { AGENT_R1_OPENAI_CONCURRENCY: 'many' }), {
    instanceOf: PolicySpecError,
    message: /CONCURRENCY/,
  });
  const policy = await resolvePolicy('openai:m@http://127.0.0.1:1/v1', calc, 0);
  t.is(policy.id, 'openai:m@http://127.0.0.1:1/v1');
  t.is(policy.version, 'm');
  t.is(policy.encode, undefined);
  // Scripted names and checkpoints still resolve as before.
  t.is((await resolvePolicy('expert', calc, 0)).id, 'expert');
});

test('an endpoint that answers 200 with junk fails the turn with a clear error', async (t) => {
  const endpoint = await fakeEndpoint((_body, n, _req, res) => {
    if (n === 1) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('<html>proxy error</html>');
    } else reply(res, 200, { choices: [] });
  });
  try {
    const policy = new OpenAIPolicy({ model: 'm', baseURL: endpoint.url, maxRetries: 0 });
    const request = {
      episodeId: 'e',
      task,
      tools: [],
      messages: [{ role: 'user' as const, content: 'x' }],
      turn: 0,
      seed: 1,
      maxTokens: 5,
    };
    await t.throwsAsync(policy.act(request), { instanceOf: ExternalPolicyError, message: /not JSON/ });
    await t.throwsAsync(policy.act(request), { instanceOf: ExternalPolicyError, message: /no choices\[0\]\.message/ });
  } finally {
    await endpoint.close();
  }
});
