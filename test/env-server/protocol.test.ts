import test from 'ava';
import { serializeRecord } from '../../src/record/record.ts';
import { connectEnv } from '../../src/env-server/client.ts';
import { observationSchema, stateSchema } from '../../src/env-server/protocol.ts';
import { planEpisodes } from '../../src/rollout/plan.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { call, FORMAT_PENALTY } from '../helpers/toy-scenario.ts';
import { calc, serve, toy } from './fixtures.ts';

test('a session over /ws: reset, tool calls (structured and raw), state, answer; the record replays', async (t) => {
  const s = await serve();
  const env = await connectEnv(s.url);
  try {
    const first = await env.reset({ seed: 3, task: 1, policy: 'qwen-test', policy_version: 'step-7' });
    t.is(first.reward, null);
    t.false(first.done);
    observationSchema.parse(first.observation);
    t.is(first.observation.text, 'say 42');
    t.is(first.observation.turn, 0);
    t.is(first.observation.process_reward, null);
    t.deepEqual(
      first.observation.messages.map((m) => m.role),
      ['system', 'user'],
    );
    t.true(first.observation.tools!.some((tool) => (tool as { function: { name: string } }).function.name === 'echo'));

    const echoed = await env.step({ tool_calls: [{ name: 'echo', arguments: { text: 'hi' } }] });
    observationSchema.parse(echoed.observation);
    t.false(echoed.done);
    t.is(echoed.reward, 0.1);
    t.is(echoed.observation.text, 'hi');
    t.is(echoed.observation.turn, 1);
    t.deepEqual(echoed.observation.action, {
      kind: 'tool_calls',
      calls: [{ name: 'echo', arguments: { text: 'hi' } }],
    });
    t.deepEqual(echoed.observation.tool_results, [{ name: 'echo', ok: true, content: 'hi' }]);
    // The history in OpenAI form: the structured call is an assistant tool call, its result a tool message.
    const [, , assistant, tool] = echoed.observation.messages;
    t.like(assistant, { role: 'assistant', content: null });
    t.is((assistant as { tool_calls: { function: { name: string } }[] }).tool_calls[0]!.function.name, 'echo');
    t.like(tool, { role: 'tool', content: 'hi' });

    const raw = await env.step(call('echo', { text: 'again' }));
    t.is(raw.observation.text, 'again');

    const state = stateSchema.parse(await env.state());
    t.like(state, {
      step_count: 2,
      scenario: 'toy',
      episodes: 1,
      split: 'train',
      task_index: 1,
      sample: 0,
      done: false,
    });

    const last = await env.step({ answer: '42' });
    t.true(last.done);
    observationSchema.parse(last.observation);
    t.like(last.observation, { end_reason: 'answered', answer: '42', outcome: { reward: 1, success: true } });
    // Step rewards sum to the record's total: the last one carries the outcome.
    t.is(last.reward, 0 + 1);
    t.is(0.1 + 0.1 + last.reward!, last.observation.total_reward!);
  } finally {
    await env.close();
  }
  const [record] = await s.recorded(1);
  t.like(record, {
    endReason: 'answered',
    status: 'ok',
    policy: { id: 'remote:qwen-test', version: 'step-7' },
    index: 0,
    runId: s.server.runId,
  });
  t.deepEqual(
    record!.turns.map((turn) => turn.action.kind),
    ['tool_calls', 'tool_calls', 'answer'],
  );
  t.true((await replayRecord(record!, toy())).verified);
  await s.server.close();
});

test('the same reset arguments and actions give byte-identical records, whatever else runs meanwhile', async (t) => {
  const s = await serve();
  const play = async (actions: Array<string | { answer: string }>, group = 'g') => {
    const env = await connectEnv(s.url);
    await env.reset({ seed: 11, task: 2, sample: 1, group });
    for (const a of actions) await env.step(a);
    await env.close();
  };
  const script = [call('roll'), call('roll'), 'not an action', { answer: '41' }];
  await Promise.all([play(script), play(script), play([call('echo', { text: 'other' }), { answer: '42' }], 'other')]);
  const mine = s.records.filter((r) => r.group === 'g');
  t.is(mine.length, 2);
  t.is(serializeRecord(mine[0]!), serializeRecord(mine[1]!));
  // The world stream is the episode seed's: the die rolls are part of what must repeat.
  t.is(mine[0]!.turns[0]!.results[0]!.name, 'roll');
  await s.server.close();
});

test('a structured answer and its text give the same record; a malformed action is handled as in rollouts', async (t) => {
  const s = await serve();
  const play = async (answer: { answer: string } | string) => {
    const env = await connectEnv(s.url);
    await env.reset({ seed: 1 });
    const bad = await env.step('no tags here');
    await env.step(answer);
    await env.close();
    return bad;
  };
  const bad = await play({ answer: '42' });
  await play('<answer>42</answer>');
  t.is(serializeRecord(s.records[0]!), serializeRecord(s.records[1]!));
  t.is(bad.reward, FORMAT_PENALTY);
  t.like(bad.observation.action, { kind: 'invalid' });
  t.regex(bad.observation.text!, /neither a <tool_call> nor an <answer>/);
  await s.server.close();
});

test("reset {seed, task, sample} is the rollout's episode: the same task and episode seed as `rollout --seed`", async (t) => {
  const s = await serve({ scenario: calc });
  const env = await connectEnv(s.url);
  await env.reset({ seed: 5, task: 3, sample: 0 });
  const state = await env.state();
  await env.close();
  const policy = { id: 'x', version: '1', act: async () => ({ text: '' }) };
  const { plan } = await planEpisodes({ scenario: calc, policy, split: 'train', episodes: 4, seed: 5 });
  t.is(state.task_id, plan[3]!.task.id);
  t.is(state.seed, plan[3]!.seed);
  const [record] = await s.recorded(1);
  t.deepEqual(record!.task, plan[3]!.task);
  await s.server.close();
});

test('budgets and tool timeouts as in rollouts: a hanging tool times out, max_turns ends the episode', async (t) => {
  const s = await serve({ scenario: toy({ maxTurns: 2 }) });
  const env = await connectEnv(s.url);
  await env.reset({ seed: 2 });
  const hung = await env.step(call('hang'));
  t.like(hung.observation.tool_results![0], { name: 'hang', ok: false });
  t.regex(hung.observation.tool_results![0]!.error!, /^timeout: /);
  const end = await env.step(call('echo', { text: 'x' }));
  t.true(end.done);
  t.is(end.observation.end_reason, 'max_turns');
  t.is(end.observation.answer, null);
  await env.close();
  const [record] = await s.recorded(1);
  t.is(record!.endReason, 'max_turns');
  t.true((await replayRecord(record!, toy({ maxTurns: 2 }))).verified);
  await s.server.close();
});

test('HTTP: /health, /metadata, /schema, /state, and the stateless /reset and /step', async (t) => {
  const s = await serve({ scenario: calc });
  const get = async (path: string) => {
    const res = await fetch(s.url + path);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  t.deepEqual(await get('/health'), { status: 200, body: { status: 'healthy' } });
  const meta = (await get('/metadata')).body;
  t.like(meta, { name: 'calculator', version: calc.version, default_split: 'train', run_id: s.server.runId });
  t.deepEqual(
    (meta.splits as { name: string }[]).map((x) => x.name),
    calc.splits,
  );
  t.is((meta.tools as { function: { name: string } }[])[0]!.function.name, 'calculate');
  t.regex(meta.system_prompt as string, /calculate tool/);
  const schema = (await get('/schema')).body as { action: { properties: object }; observation: object; state: object };
  t.true('tool_calls' in schema.action.properties && 'answer' in schema.action.properties);
  t.truthy(schema.observation);
  t.like((await get('/state')).body, { episode_id: null, step_count: 0 });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(s.url + path, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const reset = await post('/reset', { seed: 4 });
  t.is(reset.status, 200);
  t.like(reset.body, { reward: null, done: false });
  // A step over HTTP plays one action of a fresh episode (its reset arguments in the body).
  const step = await post('/step', { action: { answer: '7' }, seed: 4, request_id: 'r1', timeout_s: 5 });
  t.is(step.status, 200);
  t.like(step.body, { done: true, observation: { end_reason: 'answered', answer: '7' } });
  const invalid = await post('/step', { action: { text: 'x', answer: 'y' } });
  t.is(invalid.status, 422);
  t.like(invalid.body, { code: 'VALIDATION_ERROR' });
  t.regex(invalid.body.detail as string, /exactly one of text, tool_calls or answer/);
  t.is(s.server.activeSessions, 0);
  const records = await s.recorded(2);
  t.deepEqual(
    records.map((r) => r.endReason),
    ['error', 'answered'],
  );
  t.regex(records[0]!.error!, /stateless POST \/reset/);
  for (const r of records) t.true((await replayRecord(r, calc)).verified);
  await s.server.close();
});

test('with a step-level context, each observation carries what the step is shown, and the record replays', async (t) => {
  const s = await serve({ config: { context: 'window:1' } });
  const env = await connectEnv(s.url);
  try {
    await env.reset({ seed: 3, task: 0 });
    await env.step(call('echo', { text: 'first' }));
    const second = await env.step(call('echo', { text: 'second' }));
    // A window of one turn: the prompt, then only the last action and its result.
    t.deepEqual(
      second.observation.messages.map((m) => m.role),
      ['system', 'user', 'assistant', 'tool'],
    );
    t.like(second.observation.messages[3], { role: 'tool', content: 'second' });
    t.false(JSON.stringify(second.observation.messages).includes('first'));
    await env.step({ answer: '42' });
  } finally {
    await env.close();
  }
  const [record] = await s.recorded(1);
  t.is(record!.config.context, 'window:1');
  // Stored against concatenation: step 1 keeps all of it, step 2 drops the first turn.
  t.deepEqual(record!.turns[1]!.context, { keep: 4, messages: [] });
  t.deepEqual(record!.turns[2]!.context, {
    keep: 2,
    messages: [
      { role: 'assistant', content: record!.turns[1]!.text },
      { role: 'tool', content: 'second' },
    ],
  });
  t.true((await replayRecord(record!, toy())).verified);
  await s.server.close();
});

test("with a model's action format (env serve --action-format hermes), a client's plain turn is its answer and its <tool_call> a call", async (t) => {
  const s = await serve({ scenario: calc, config: { actionFormat: 'hermes' } });
  const env = await connectEnv(s.url);
  await env.reset({ seed: 5, task: 0, sample: 0 });
  const call = await env.step('<tool_call>\n{"name": "calculate", "arguments": {"expression": "2 + 2"}}\n</tool_call>');
  t.like(call.observation.action, { kind: 'tool_calls' });
  const answer = await env.step('<think>done</think>\n\n4');
  t.true(answer.done);
  t.like(answer.observation.action, { kind: 'answer', text: '4' });
  await env.close();
  const [record] = await s.recorded(1);
  t.is(record!.config.actionFormat, 'hermes');
  t.true((await replayRecord(record!, calc)).verified);
  await s.server.close();
});
