import test from 'ava';
import OpenAI from 'openai';
import type { Task } from '../../src/core/types.ts';
import type { AgentFunction, AgentModule } from '../../src/gateway/agent-module.ts';
import { AgentSession } from '../../src/gateway/agent-session.ts';
import { policyAnswerer } from '../../src/gateway/gateway.ts';
import { DemonstratorAnswerer } from '../../src/gateway/demonstrator-answerer.ts';
import { replayAgent } from '../../src/gateway/replay-agent.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';

let policy: ServablePolicy;
const tasks = (calc.tasks({ split: 'train', seed: 5, count: 2 }) as Task[]).map((t) => ({ ...t, split: 'train' }));

test.before(async () => {
  const { dir } = await calculatorCheckpoint();
  policy = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
});

const module = (run: AgentFunction): AgentModule => ({ run, file: 'inline.ts', version: 'test' });

/** One request, then the given ending. */
const asks =
  (then: () => unknown): AgentFunction =>
  async (task, client, _options) => {
    const openai = new OpenAI({
      baseURL: client.baseURL,
      apiKey: client.apiKey,
      defaultHeaders: client.headers,
      maxRetries: 0,
    });
    await openai.chat.completions.create({
      model: client.model,
      messages: [{ role: 'user', content: task.question }],
      max_tokens: 4,
    });
    return then() as never;
  };

async function play(run: AgentFunction) {
  const session = await AgentSession.open({ agent: module(run), tasks, seed: 1, timeoutMs: 5_000 });
  try {
    return await session.play({ answerer: policyAnswerer(policy, 'agent-r1'), tasks, group: 2, seed: 1 });
  } finally {
    await session.close();
  }
}

test("every way an agent can fail is its episode's error record, the turns it made kept, the others played", async (t) => {
  let calls = 0;
  const records = await play(async (task, client, options) => {
    const k = calls++;
    if (k === 0) throw new Error('tool crashed');
    if (k === 1) return asks(() => ({ reward: Number.NaN }))(task, client, options);
    if (k === 2) return { reward: 1 }; // no model request at all
    return asks(() => ({ reward: 1, success: true }))(task, client, options);
  });
  t.is(records.length, 4);
  t.deepEqual(
    records.map((r) => r.index),
    [0, 1, 2, 3],
  );
  t.like(records[0]!, { status: 'error', error: 'the agent threw: tool crashed' });
  t.like(records[1]!, { status: 'error' });
  t.regex(records[1]!.error!, /its reward is not a finite number/);
  t.is(records[1]!.turns.length, 1, 'the turn it made is kept');
  t.like(records[2]!, { status: 'error', error: 'the agent made no model request: there is nothing to reward' });
  t.like(records[3]!, { status: 'ok', outcome: { reward: 1, success: true } });
});

test('an agent that hangs is cut at its deadline (its signal aborted); its later requests are refused', async (t) => {
  let late: Promise<unknown> | undefined;
  const hangs: AgentFunction = async (task, client, { signal }) => {
    await asks(() => null)(task, client, { signal });
    await new Promise((resolve) => signal.addEventListener('abort', resolve));
    late ??= (async () => asks(() => null)(task, client, { signal: new AbortController().signal }))().catch(
      (e: unknown) => e,
    );
    return { reward: 1 };
  };
  const session = await AgentSession.open({ agent: module(hangs), tasks, seed: 1, timeoutMs: 300 });
  try {
    const records = await session.play({ answerer: policyAnswerer(policy, 'agent-r1'), tasks, group: 2, seed: 1 });
    t.true(records.every((r) => r.status === 'error' && r.error === 'the agent did not finish within 0.3 s'));
    t.true(records.every((r) => r.turns.length === 1));
    t.is(((await late) as { status?: number }).status, 409);
  } finally {
    await session.close();
  }
});

test('replay --agent of a record whose agent now rewards differently names the outcome field', async (t) => {
  const records = await play(asks(() => ({ reward: 1, success: true })));
  const same = await replayAgent(module(asks(() => ({ reward: 1, success: true }))), records);
  t.true(same.every((r) => r.verified));
  const changed = await replayAgent(module(asks(() => ({ reward: 0.5, success: true }))), records.slice(0, 1));
  t.like(changed[0]!.divergence, { turn: null, field: 'outcome.reward', expected: 1, actual: 0.5 });
  const more = await replayAgent(
    module(async (task, client, options) => {
      await asks(() => null)(task, client, options);
      return asks(() => ({ reward: 1 }))(task, client, options);
    }),
    records.slice(0, 1),
  );
  t.like(more[0]!.divergence, { turn: 1, field: 'turns', expected: 1, actual: 2 });
});

test('a demonstrator that answers with no text fails that request: the agent sees a 500, its episode is an error record', async (t) => {
  const session = await AgentSession.open({ agent: module(asks(() => ({ reward: 1 }))), tasks, seed: 1 });
  try {
    const silent = new DemonstratorAnswerer(() => undefined as never, 'demo', 'agent-r1');
    const [record] = await session.play({ answerer: silent, tasks: tasks.slice(0, 1), group: 1, seed: 1 });
    t.is(record!.status, 'error');
    t.regex(record!.error!, /the agent threw: .*the demonstrator returned no text/);
  } finally {
    await session.close();
  }
});
