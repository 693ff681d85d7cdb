import test from 'ava';
import { createActor } from 'xstate';
import { episodeMachine, initialSnapshot } from '../../machines/episode.ts';
import { canonicalJson, inCanonicalOrder } from '../../src/core/canonical-json.ts';
import { DEFAULT_EPISODE_CONFIG } from '../../src/core/types.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import type { Policy } from '../../src/policy/policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { call, FORMAT_PENALTY, scripted, toyScenario } from '../helpers/toy-scenario.ts';

const task = { id: 'toy-0', split: 'train', question: 'say 42', answer: '42' };

async function play(texts: string[] | Policy, episode = {}) {
  const policy = Array.isArray(texts) ? scripted(texts) : texts;
  return runEpisode({ scenario: toyScenario(episode), task, policy, seed: 1 });
}

test('an answer at the first turn ends the episode with the outcome reward', async (t) => {
  const r = await play(['<answer>42</answer>']);
  t.is(r.endReason, 'answered');
  t.is(r.turns.length, 1);
  t.deepEqual(r.turns[0]!.states, ['generate', 'parseToolCall', 'transition', 'reward', 'outcome', 'done']);
  t.true(r.outcome.success);
  t.is(r.totalReward, 1);
  t.is(r.answer, '42');
});

test('tool call then answer: the tool result is the observation, process reward on the tool turn', async (t) => {
  const r = await play([call('echo', { text: 'hi' }), '<answer>42</answer>']);
  t.is(r.turns.length, 2);
  t.deepEqual(r.turns[0]!.states, ['generate', 'parseToolCall', 'execute', 'transition', 'reward']);
  t.is(r.turns[0]!.observation, 'hi');
  t.is(r.turns[0]!.reward, 0.1);
  t.is(r.processReward, 0.1);
  t.is(r.totalReward, 1.1);
  t.deepEqual(
    r.prompt.map((m) => m.role),
    ['system', 'user'],
  );
});

test('a record is built in canonical key order (arguments as the model wrote them copied), so JSON.stringify writes its line', async (t) => {
  const r = await play([call('echo', { text: 'hi', another: { z: 1, y: 2 } }), '<answer>42</answer>']);
  const action = r.turns[0]!.action;
  t.true(
    action.kind === 'tool_calls' &&
      JSON.stringify(action.calls[0]!.arguments) === '{"another":{"y":2,"z":1},"text":"hi"}',
  );
  for (const field of ['turns', 'prompt', 'config', 'scenario', 'outcome'] as const)
    t.true(inCanonicalOrder(r[field]), field);
  t.is(serializeRecord(r), canonicalJson(r));
});

test('the history given to the policy holds every action and observation', async (t) => {
  const seen: string[][] = [];
  const policy: Policy = {
    id: 'p',
    version: '1',
    act: async ({ turn, messages }) => {
      seen.push(messages.map((m) => `${m.role}:${m.content}`));
      return { text: turn === 0 ? call('echo', { text: 'obs' }) : '<answer>42</answer>' };
    },
  };
  await play(policy);
  t.deepEqual(seen[1], ['system:toy', 'user:say 42', `assistant:${call('echo', { text: 'obs' })}`, 'tool:obs']);
});

test('max turns ends the episode', async (t) => {
  const r = await play([call('echo', { text: 'a' })], { maxTurns: 3 });
  t.is(r.endReason, 'max_turns');
  t.is(r.turns.length, 3);
  t.false(r.outcome.success);
  t.is(r.turns.at(-1)!.states.at(-1), 'done');
});

test('the total token budget ends the episode', async (t) => {
  const r = await play([call('echo', { text: 'a'.repeat(40) })], { maxTotalTokens: 60, maxTurns: 50 });
  t.is(r.endReason, 'max_tokens');
  t.true(r.totalTokens >= 60);
  t.true(r.turns.length < 50);
});

test('an action over the per-turn token budget is refused with a format penalty', async (t) => {
  const r = await play([`<answer>${'4'.repeat(400)}</answer>`, '<answer>42</answer>'], { maxTokensPerTurn: 20 });
  t.is(r.turns[0]!.action.kind, 'invalid');
  t.regex(r.turns[0]!.observation!, /over the per-turn limit of 20/);
  t.is(r.turns[0]!.reward, FORMAT_PENALTY);
  t.is(r.endReason, 'answered');
});

test('the policy is told how many tokens it may generate', async (t) => {
  const budgets: number[] = [];
  const policy: Policy = {
    id: 'p',
    version: '1',
    act: async ({ maxTokens }) => {
      budgets.push(maxTokens);
      return { text: call('echo', { text: 'abcd' }), tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] };
    },
  };
  await play(policy, { maxTokensPerTurn: 16, maxTotalTokens: 40, maxTurns: 10 });
  t.is(budgets[0], 16);
  t.true(budgets.every((b) => b <= 16));
  t.true(budgets.at(-1)! < 16);
});

for (const [name, text, pattern] of [
  ['invalid JSON', '<tool_call>{"name": "echo", </tool_call>', /invalid JSON/],
  ['an unclosed tag', '<tool_call>{"name": "echo", "arguments": {"text": "a"}}', /unclosed <tool_call>/],
  ['no action at all', 'I am thinking', /neither a <tool_call> nor an <answer>/],
  ['a missing name', '<tool_call>{"arguments": {}}</tool_call>', /no "name"/],
] as const) {
  test(`${name}: an error observation naming the problem, a format penalty, and the episode goes on`, async (t) => {
    const r = await play([text, '<answer>42</answer>']);
    t.is(r.turns[0]!.action.kind, 'invalid');
    t.regex(r.turns[0]!.observation!, pattern);
    t.is(r.turns[0]!.reward, FORMAT_PENALTY);
    t.is(r.endReason, 'answered');
    t.true(r.outcome.success);
  });
}

for (const [name, text, kind, pattern] of [
  [
    'an unknown tool',
    call('abacus'),
    'unknown_tool',
    /unknown tool "abacus"; available tools: echo, boom, hang, big, roll/,
  ],
  ['arguments failing the schema', call('echo', { txt: 1 }), 'bad_arguments', /invalid arguments for echo/],
  ['a tool that throws', call('boom'), 'tool_error', /boom failed: kaboom/],
  ['a tool that hangs', call('hang'), 'timeout', /hang timed out after 50 ms/],
] as const) {
  test(`${name}: an error result and observation, and the episode goes on`, async (t) => {
    const r = await play([text, '<answer>42</answer>']);
    const result = r.turns[0]!.results[0]!;
    t.false(result.ok);
    t.is(result.error!.kind, kind);
    t.regex(r.turns[0]!.observation!, pattern);
    t.is(r.endReason, 'answered');
    t.true(r.outcome.success);
  });
}

test('a hanging tool costs its timeout, not more', async (t) => {
  const start = Date.now();
  await play([call('hang'), '<answer>42</answer>']);
  t.true(Date.now() - start < 1000);
});

test('oversized tool output is cut with a marker', async (t) => {
  const r = await play([call('big', { n: 5000 }), '<answer>42</answer>']);
  const result = r.turns[0]!.results[0]!;
  t.true(result.truncated);
  t.true(result.content.startsWith('x'.repeat(100)));
  t.regex(result.content, /… \[truncated 4900 characters\]$/);
  t.is(r.turns[0]!.observation, result.content);
});

test("a turn's results are bounded too: past 8 results' worth, its remaining calls are not run, each saying so; it replays", async (t) => {
  const calls = Array.from({ length: 12 }, () => call('big', { n: 500 })).join('');
  const r = await play([calls, '<answer>42</answer>'], { maxToolOutputChars: 100 });
  const results = r.turns[0]!.results;
  t.is(results.length, 12);
  const run = results.filter((x) => x.ok);
  const skipped = results.filter((x) => !x.ok);
  t.true(run.length >= 6 && skipped.length >= 1, `${run.length} run, ${skipped.length} not`);
  t.true(results.findIndex((x) => !x.ok) === run.length, 'the calls not run are the last ones');
  const held = run.reduce((n, x) => n + x.content.length, 0);
  t.true(held - run.at(-1)!.content.length < 800);
  t.regex(
    skipped[0]!.content,
    /^not run: this turn's tool results already hold \d+ characters, the limit of a turn \(800: 8 × maxToolOutputChars\)$/,
  );
  t.true((await replayRecord(r, toyScenario({ maxToolOutputChars: 100 }))).verified);
});

test('several calls in one turn run in order and each gets its result', async (t) => {
  const r = await play([
    call('echo', { text: 'one' }) + call('boom') + call('echo', { text: 'two' }),
    '<answer>42</answer>',
  ]);
  t.deepEqual(
    r.turns[0]!.results.map((x) => x.ok),
    [true, false, true],
  );
  t.regex(r.turns[0]!.observation!, /\[1\] echo: one\n\[2\] boom: Error: boom failed: kaboom\n\[3\] echo: two/);
});

test('a policy that fails ends the episode with reason error, and the record says why', async (t) => {
  const policy: Policy = {
    id: 'p',
    version: '1',
    act: async () => {
      throw new Error('policy server down');
    },
  };
  const r = await play(policy);
  t.is(r.endReason, 'error');
  t.is(r.status, 'error');
  t.is(r.error, 'policy server down');
});

test('a policy output without a string text, or with tokens that are not an array, ends the episode as an error that says so', async (t) => {
  for (const output of [undefined, {}, { text: 5 }, { text: 'x', tokens: 'abc' }]) {
    const policy: Policy = { id: 'p', version: '1', act: async () => output as never };
    const r = await play(policy);
    t.is(r.status, 'error');
    t.is(r.endReason, 'error');
    t.regex(
      r.error!,
      /^the policy returned (an output without a string "text"|"tokens" or "logprobs" that are not arrays) \(got /,
    );
  }
});

test('a ToolEnv step or outcome that breaks the contract ends the episode as an error naming the ToolEnv', async (t) => {
  const base = toyScenario();
  const cases: Array<[Partial<Scenario['env']>, RegExp]> = [
    [
      { step: () => ({ observation: 'x', reward: Number.NaN, done: false }) },
      /ToolEnv step returned a reward that is not a finite number/,
    ],
    [
      { step: () => ({ observation: 3, reward: 0, done: false }) as never },
      /ToolEnv step returned an observation that is neither/,
    ],
    [
      { step: () => ({ observation: null, reward: 0 }) as never },
      /ToolEnv step returned a "done" that is not a boolean/,
    ],
    [
      { outcome: () => ({ reward: '1', success: true }) as never },
      /ToolEnv outcome returned an outcome whose reward is not a finite number/,
    ],
    [
      { outcome: () => ({ reward: 1 }) as never },
      /ToolEnv outcome returned an outcome whose "success" is not a boolean/,
    ],
  ];
  for (const [env, message] of cases) {
    const scenario = { ...base, env: { ...base.env, ...env } } as Scenario;
    const r = await runEpisode({ scenario, task, policy: scripted(['<answer>42</answer>']), seed: 1 });
    t.is(r.status, 'error');
    t.regex(r.error!, message);
  }
});

test('stochastic tools draw from the episode world stream: same seed same world, other seed other world', async (t) => {
  const scenario = toyScenario({ maxTurns: 8 });
  const roll = (seed: number) => runEpisode({ scenario, task, policy: scripted([call('roll')]), seed });
  const rolls = async (seed: number) => (await roll(seed)).turns.map((x) => x.observation).join(',');
  t.is(await rolls(1), await rolls(1));
  t.not(await rolls(1), await rolls(2));
});

test('an episode starts from the snapshot the machine itself gives as its initial one', (t) => {
  const input = {
    config: { ...DEFAULT_EPISODE_CONFIG, maxTurns: 3 },
    prompt: [{ role: 'user' as const, content: 'say 42' }],
    promptTokens: [1, 2, 3],
  };
  const direct = initialSnapshot(input);
  const machine = createActor(episodeMachine, { input }).getSnapshot();
  t.is(direct.status, machine.status);
  t.deepEqual(direct.value, machine.value);
  t.deepEqual(direct.context, machine.context);
  t.deepEqual(
    direct._nodes.map((n) => n.id),
    machine._nodes.map((n) => n.id),
  );
  t.deepEqual(direct.historyValue, machine.historyValue);
  t.deepEqual(direct.children, machine.children);
});

test('a failure keeps the finished turns and their paths; the path ends in outcome and done on the last of them', async (t) => {
  const base = toyScenario();
  const echo = call('echo', { text: 'hi' });
  const failing = (at: number): Policy => ({
    id: 'p',
    version: '1',
    act: async ({ turn }) => {
      if (turn === at) throw new Error('policy server down');
      return { text: echo };
    },
  });
  const toolTurn = ['generate', 'parseToolCall', 'execute', 'transition', 'reward'];
  const paths = (r: { turns: { states: string[] }[] }) => r.turns.map((turn) => turn.states);
  // The policy fails at the first turn: nothing finished, nothing recorded.
  const first = await play(failing(0));
  t.deepEqual(paths(first), []);
  // At the second: the first turn is kept, and the episode's end is on its path.
  const second = await play(failing(1));
  t.deepEqual(paths(second), [[...toolTurn, 'outcome', 'done']]);
  t.is(second.error, 'policy server down');
  // The ToolEnv fails in a step, then in its outcome.
  const throwing = (env: Partial<Scenario['env']>) => ({ ...base, env: { ...base.env, ...env } }) as Scenario;
  const stepFails = await runEpisode({
    scenario: throwing({
      step: ({ turn }) => {
        if (turn === 1) throw new Error('step broke');
        return { observation: 'ok', reward: 0, done: false };
      },
    }),
    task,
    policy: scripted([echo, echo]),
    seed: 1,
  });
  t.deepEqual(paths(stepFails), [[...toolTurn, 'outcome', 'done']]);
  t.is(stepFails.error, 'step broke');
  const outcomeFails = await runEpisode({
    scenario: throwing({
      outcome: () => {
        throw new Error('judge down');
      },
    }),
    task,
    policy: scripted([echo, '<answer>42</answer>']),
    seed: 1,
  });
  t.deepEqual(paths(outcomeFails), [
    toolTurn,
    ['generate', 'parseToolCall', 'transition', 'reward', 'outcome', 'done'],
  ]);
  t.is(outcomeFails.endReason, 'error');
  t.is(outcomeFails.error, 'judge down');
});
