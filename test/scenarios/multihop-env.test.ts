import test from 'ava';
import { createRng } from '../../src/core/rng.ts';
import type { Json, ToolResult, TurnRecord } from '../../src/core/types.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { ToolRunner } from '../../src/tools/runner.ts';
import { toOpenAITool } from '../../src/tools/tool.ts';
import {
  DEFAULT_QA_REWARDS,
  judgeTurn,
  parseRewardOption,
  searchKey,
  type QaTask,
} from '../../scenarios/multihop-qa/env.ts';
import { createMultihopQaScenario, loadWorld } from '../../scenarios/multihop-qa/index.ts';
import { answerAction, searchAction } from '../../scenarios/multihop-qa/policies.ts';
import { DEFAULT_TOP_K, createCorpus } from '../../scenarios/multihop-qa/search.ts';
import { searchTool } from '../../scenarios/multihop-qa/search-tool.ts';

const W = DEFAULT_QA_REWARDS;
const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;

/** A scripted policy: the i-th turn writes texts[i]. */
function script(texts: string[]): Policy {
  return {
    id: 'script',
    version: 'test',
    act: async (req) => ({ text: texts[req.turn] ?? answerAction('out of script') }),
  };
}

/** A bridge task of the test split whose first search finds only the first gold document and whose second finds the second. */
function cleanBridgeTask(): QaTask {
  const { tasks, corpus } = loadWorld(1, 'small');
  const task = tasks.test.find((x) => {
    if (x.type !== 'bridge') return false;
    const first = corpus.search(x.meta.queries[0]!, DEFAULT_TOP_K).map((h) => h.id);
    const second = corpus.search(x.meta.queries[1]!, DEFAULT_TOP_K).map((h) => h.id);
    return first.includes(x.meta.gold[0]!) && !first.includes(x.meta.gold[1]!) && second.includes(x.meta.gold[1]!);
  });
  if (!task) throw new Error('no clean bridge task in the test split');
  return structuredClone(task);
}

test('process rewards fire exactly where they should on a scripted episode', async (t) => {
  const scenario = createMultihopQaScenario({});
  const task = cleanBridgeTask();
  const [q1, q2] = task.meta.queries as [string, string];
  const texts = [
    'I will look it up.', // 0: malformed (no tool call, no answer)
    searchAction(q1), // 1: well formed + first gold document
    searchAction(`  ${q1.toUpperCase()} `), // 2: well formed + identical repeated search (case, spaces)
    '<tool_call>{"name": "lookup", "arguments": {"query": "x"}}</tool_call>', // 3: unknown tool
    '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>', // 4: invalid arguments
    searchAction(q2), // 5: well formed + second gold document
    `<tool_call>${JSON.stringify({ name: 'search', arguments: { query: q1, k: 1 } })}</tool_call>`, // 6: same query, other k: not a repeat
    answerAction(task.meta.distractor!), // 7: a wrong answer
  ];
  const record = await runEpisode({ scenario, task, policy: script(texts), seed: 5 });
  const rewards = record.turns.map((x) => x.reward);
  const expected = [
    W.malformedAction,
    W.wellFormedCall + W.goldDocument,
    W.wellFormedCall + W.repeatedSearch,
    W.malformedAction,
    W.malformedAction,
    W.wellFormedCall + W.goldDocument,
    W.wellFormedCall,
    0,
  ];
  t.is(rewards.length, expected.length);
  rewards.forEach((r, i) => t.true(close(r, expected[i]!), `turn ${i}: ${r} != ${expected[i]}`));
  t.deepEqual(
    record.turns.map((x) => x.info?.goldFound ?? []),
    [[], [task.meta.gold[0]], [], [], [], [task.meta.gold[1]], [], []],
  );
  t.regex(
    record.turns[0]!.observation!,
    /^Invalid action: the action has neither a <tool_call> nor an <answer>\. Search with <tool_call>/,
  );
  t.regex(record.turns[3]!.observation!, /Error: unknown tool "lookup"; available tools: search/);
  t.regex(record.turns[4]!.observation!, /Error: invalid arguments for search/);
  t.true(record.turns[1]!.observation!.startsWith('[1] '));
  t.is(record.turns[2]!.info?.repeatedSearches, 1);
  t.is(record.turns.at(-1)!.observation, null);
  t.deepEqual(record.outcome, {
    reward: 0,
    success: false,
    metrics: { em: 0, f1: record.outcome.metrics!.f1, recall: 1 },
  });
  t.true(
    close(
      record.processReward,
      expected.reduce((a, b) => a + b, 0),
    ),
  );
  t.true(close(record.totalReward, record.processReward + record.outcome.reward));
  t.is(record.endReason, 'answered');
  t.true((await replayRecord(record, scenario)).verified, 'the episode replays exactly');
});

test('a correct answer earns the outcome; a document title counts as the name; no answer scores 0', async (t) => {
  const scenario = createMultihopQaScenario({});
  const { tasks } = loadWorld(1, 'small');
  const task = structuredClone(tasks.test.find((x) => x.type === 'inference' && (x.meta.answers?.length ?? 0) > 1)!);
  const alias = task.meta.answers![1]!;
  const ok = await runEpisode({
    scenario,
    task,
    policy: script([...task.meta.queries.map(searchAction), answerAction(alias)]),
    seed: 1,
  });
  t.deepEqual(ok.outcome, { reward: W.exactMatch, success: true, metrics: { em: 1, f1: 1, recall: 1 } });
  const silent = await runEpisode({ scenario, task, policy: script(Array(20).fill(searchAction('Norvia'))), seed: 1 });
  t.is(silent.endReason, 'max_turns');
  t.is(silent.turns.length, 8, 'the scenario allows 8 turns');
  t.deepEqual(silent.outcome, { reward: 0, success: false, metrics: { em: 0, f1: 0, recall: 0 } });
  // the first search is well formed; the next 7 are identical repeats
  t.true(close(silent.processReward, 8 * W.wellFormedCall + 7 * W.repeatedSearch));
});

test('reward weights come from the rewards option', async (t) => {
  const scenario = createMultihopQaScenario({ rewards: '{"goldDocument": 0.5, "f1": 0.5}' });
  const task = cleanBridgeTask();
  const record = await runEpisode({
    scenario,
    task,
    policy: script([searchAction(task.meta.queries[0]!), answerAction('nothing at all')]),
    seed: 1,
  });
  t.true(close(record.turns[0]!.reward, W.wellFormedCall + 0.5));
  t.deepEqual(parseRewardOption(undefined), { ...W });
  t.deepEqual(parseRewardOption('{"exactMatch": 2}'), { ...W, exactMatch: 2 });
  t.throws(() => parseRewardOption('{"bonus": 1}'), { message: /bonus/ });
  t.throws(() => parseRewardOption('[1'), { message: /JSON object of weights/ });
});

test("judgeTurn: a failing tool is not the agent's fault; several calls in one turn earn one format reward", (t) => {
  const task = cleanBridgeTask();
  const failed: ToolResult = {
    name: 'search',
    ok: false,
    content: 'search timed out after 5 ms',
    error: { kind: 'timeout', message: 'search timed out after 5 ms' },
  };
  const step = judgeTurn(task, { kind: 'tool_calls' }, [failed], [], W);
  t.true(close(step.reward, W.wellFormedCall));
  t.is(step.observation, 'Error: search timed out after 5 ms');
  const hit = (id: string) => ({ id, title: id, text: `${id} text` });
  const res = (query: string, ids: string[]): ToolResult => ({
    name: 'search',
    ok: true,
    content: '',
    data: { query, k: 3, results: ids.map(hit) },
  });
  const two = judgeTurn(
    task,
    { kind: 'tool_calls' },
    [res('a', [task.meta.gold[0]!]), res('A', [task.meta.gold[0]!, task.meta.gold[1]!])],
    [],
    W,
  );
  t.true(close(two.reward, W.wellFormedCall + 2 * W.goldDocument + W.repeatedSearch));
  t.deepEqual(two.info?.goldFound, task.meta.gold);
  // gold documents already seen in an earlier turn earn nothing again
  const history = [{ info: two.info } as unknown as TurnRecord];
  const again = judgeTurn(task, { kind: 'tool_calls' }, [res('b', task.meta.gold)], history, W);
  t.true(close(again.reward, W.wellFormedCall));
  const none = judgeTurn(task, { kind: 'tool_calls' }, [res('zebra', [])], [], W);
  t.is(none.observation, 'No results for "zebra".');
  t.is(searchKey(' The  Film ', 3), searchKey('the film', 3));
  t.not(searchKey('the film', 3), searchKey('the film', 2));
});

test('the search tool: arguments checked by its schema, k bounded, needs the episode corpus', async (t) => {
  const corpus = createCorpus('t', [
    { id: 'a', title: 'Alpha', text: 'first letter' },
    { id: 'b', title: 'Beta', text: 'second letter' },
  ]);
  const runner = new ToolRunner([searchTool], { timeoutMs: 1000, maxOutputChars: 10_000 });
  const ctx = { task: cleanBridgeTask(), rng: createRng(1), state: { corpus } };
  const ok = await runner.run({ name: 'search', arguments: { query: 'letter', k: 1 } }, ctx);
  t.true(ok.ok);
  t.is((ok.data as { results: unknown[] }).results.length, 1);
  const def = await runner.run({ name: 'search', arguments: { query: 'letter' } }, ctx);
  t.is((def.data as { k: number }).k, DEFAULT_TOP_K);
  const bads: Array<{ [key: string]: Json }> = [
    { query: '' },
    { query: 'x', k: 0 },
    { query: 'x', k: 11 },
    { query: 'x', k: 1.5 },
    { query: 'x', extra: 1 },
    {},
  ];
  for (const args of bads) {
    const bad = await runner.run({ name: 'search', arguments: args }, ctx);
    t.is(bad.error?.kind, 'bad_arguments', JSON.stringify(args));
  }
  const noCorpus = await runner.run({ name: 'search', arguments: { query: 'x' } }, { ...ctx, state: undefined });
  t.is(noCorpus.error?.kind, 'tool_error');
  t.regex(noCorpus.content, /no corpus for this episode/);
});

test('the prompt lists the tool with its arguments and the action format', (t) => {
  const scenario = createMultihopQaScenario({});
  const task = cleanBridgeTask();
  const [system, user] = scenario.env.prompt(task, scenario.tools.map(toOpenAITool));
  t.is(system!.role, 'system');
  t.true(system!.content.includes('- search(query: string, k?: integer): Search the encyclopedia.'));
  t.true(system!.content.includes('<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>'));
  t.true(system!.content.includes('<answer>...</answer>'));
  t.deepEqual(user, { role: 'user', content: task.question });
});

test('recall: the share of gold documents retrieved tells a search failure from a reading failure', async (t) => {
  const scenario = createMultihopQaScenario({});
  const task = cleanBridgeTask();
  const [first, second] = task.meta.queries;
  const early = await runEpisode({
    scenario,
    task,
    policy: script([searchAction(first!), answerAction(task.answer)]),
    seed: 1,
  });
  t.is(early.outcome.metrics?.recall, 0.5, 'one hop of two searched (right by luck or not, EM says nothing about it)');
  const misread = await runEpisode({
    scenario,
    task,
    policy: script([searchAction(first!), searchAction(second!), answerAction('nothing at all')]),
    seed: 1,
  });
  t.deepEqual(misread.outcome.metrics, { em: 0, f1: 0, recall: 1 });
  // a repeated search finds nothing new and counts once
  const twice = await runEpisode({
    scenario,
    task,
    policy: script([searchAction(first!), searchAction(first!), answerAction('x')]),
    seed: 1,
  });
  t.is(twice.outcome.metrics?.recall, 0.5);
  // not a reward: the outcome reward is EM (and F1) only
  t.is(misread.outcome.reward, 0);
});
