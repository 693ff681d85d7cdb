import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { calculator } from '../../scenarios/calculator/index.ts';
import { gridworld } from '../../scenarios/gridworld/index.ts';
import multihopQa from '../../scenarios/multihop-qa/index.ts';
import type { EpisodeRecord, Message } from '../../src/core/types.ts';
import { ContextModeError, contextHook, contextSetting, NoCardError } from '../../src/env/context.ts';
import { runEpisode } from '../../src/episode/run-episode.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import { TfjsPolicy } from '../../src/policy/tfjs/tfjs-policy.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { parseRecordLine, sealRecord, serializeRecord } from '../../src/record/record.ts';
import { isStepLevel, shownContexts } from '../../src/record/step-context.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { instantiateScenario } from '../../src/scenario/load.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { call, scripted, toyScenario } from '../helpers/toy-scenario.ts';

const grid = gridworld as unknown as Scenario;
const calc = calculator as unknown as Scenario;

async function expertRun(scenario: Scenario, context: string | undefined, episodes = 6, policyName = 'expert') {
  const policy = await scenario.policies[policyName]!({ scenario, seed: 3 });
  return rollout({ scenario, policy, split: 'train', episodes, seed: 3, config: context ? { context } : {} });
}

/** Read back from its line, as replay reads a file. */
const fromLine = (r: EpisodeRecord) => parseRecordLine(serializeRecord(r));

test('a run setting of concat on a ToolEnv without a hook is no setting: the records keep their bytes', async (t) => {
  t.is(contextSetting(calc, 'concat'), undefined);
  t.is(contextSetting(calc, undefined), undefined);
  t.is(contextSetting(grid, 'window:3'), 'window:3');
  const plain = await expertRun(calc, undefined);
  const concat = await expertRun(calc, contextSetting(calc, 'concat'));
  t.deepEqual(concat.records.map(serializeRecord), plain.records.map(serializeRecord));
  t.false(plain.records.some(isStepLevel));
});

test('unknown context modes and a card the scenario lacks are usage errors that say what is valid', (t) => {
  for (const bad of ['window', 'window:0', 'window:-1', 'window:1.5', 'window:99999', 'cards', '', 'summary']) {
    const err = t.throws(() => contextSetting(grid, bad), { instanceOf: ContextModeError });
    t.regex(err!.message, /concat, window:K, card/);
  }
  const err = t.throws(() => contextHook(calc, 'card'), { instanceOf: NoCardError });
  t.regex(err!.message, /calculator has no state card/);
  t.throws(() => contextSetting(calc, 'card'), { instanceOf: NoCardError });
});

test('window:K shows the prompt and the last K turns; the path says the ToolEnv was asked', async (t) => {
  const { records } = await expertRun(grid, 'window:2', 4);
  for (const record of records) {
    const shown = shownContexts(record);
    record.turns.forEach((turn, i) => {
      const expected: Message[] = [...record.prompt];
      for (const earlier of record.turns.slice(Math.max(0, i - 2), i)) {
        expected.push({ role: 'assistant', content: earlier.text });
        if (earlier.observation !== null) expected.push({ role: 'tool', content: earlier.observation });
      }
      t.deepEqual(shown[i]!.messages, expected, `${record.episodeId} step ${i}`);
      if (i < record.turns.length - 1) t.is(turn.states.at(-1), 'context');
      t.is(turn.context === undefined, i === 0);
    });
    t.deepEqual(record.turns.at(-1)!.states.slice(-2), ['outcome', 'done']);
  }
});

test('step-level records replay verified, read back from their lines, in gridworld and multi-hop QA', async (t) => {
  const qa = await instantiateScenario(multihopQa, { size: 'tiny' });
  for (const [scenario, context, policy] of [
    [grid, 'window:2', 'expert'],
    [grid, 'card', 'random'],
    [qa, 'card', 'noisy-expert'],
    [qa, 'window:1', 'expert'],
  ] as const) {
    const { records } = await expertRun(scenario, context, 6, policy);
    t.true(records.some(isStepLevel), `${scenario.id} ${context}`);
    for (const record of records) {
      const result = await replayRecord(fromLine(record), scenario);
      t.true(result.verified, `${scenario.id} ${context} ${record.episodeId}: ${JSON.stringify(result.divergence)}`);
    }
  }
});

test('a tampered context is a divergence named by its step, even resealed', async (t) => {
  const { records } = await expertRun(grid, 'card', 4);
  const victim = records.find((r) => r.turns.length >= 3)!;
  const { checksum: _c, ...rest } = structuredClone(victim);
  rest.turns[2]!.context!.messages.at(-1)!.content = 'Position (x, y): 0, 0. You have already escaped.';
  const tampered = sealRecord(rest);
  const result = await replayRecord(fromLine(tampered), grid);
  t.false(result.verified);
  t.is(result.divergence!.turn, 2);
  t.is(result.divergence!.field, 'context');
});

test('a replay under another context diverges at the first step whose context differs', async (t) => {
  const { records } = await expertRun(grid, 'window:3', 2);
  const record = records.find((r) => r.turns.length > 5)!;
  const { checksum: _c, ...rest } = structuredClone(record);
  rest.config.context = 'window:4';
  const result = await replayRecord(sealRecord(rest), grid);
  t.false(result.verified);
  t.is(result.divergence!.field, 'context');
  t.is(result.divergence!.turn, 4, 'the first step where 4 turns differ from 3');
});

test('a ToolEnv context hook that throws or answers nonsense ends the episode as an error record', async (t) => {
  const task = { id: 'toy-0', split: 'train', question: 'say 42', answer: '42' };
  for (const [context, message] of [
    [
      () => {
        throw new Error('no context today');
      },
      /no context today/,
    ],
    [() => 'not a list', /ToolEnv context returned a context that is not a non-empty list/],
    [() => [], /not a non-empty list/],
    [() => [{ role: 'robot', content: 'x' }], /without a known role/],
  ] as const) {
    const scenario = toyScenario();
    scenario.env = { ...scenario.env, context: context as never };
    const policy = scripted([call('echo', { text: 'a' }), '<answer>42</answer>']);
    const r = await runEpisode({ scenario, task, policy, seed: 1 });
    t.is(r.status, 'error');
    t.regex(r.error!, message);
    t.is(r.turns.length, 1, 'the finished turn is kept');
    t.deepEqual(r.turns[0]!.states.slice(-3), ['context', 'outcome', 'done']);
  }
});

test("a ToolEnv's own context hook is used without any run setting, and replays", async (t) => {
  const scenario = toyScenario();
  const seen: string[][] = [];
  scenario.env = {
    ...scenario.env,
    context: ({ prompt, history }) => [...prompt, { role: 'user', content: `turns so far: ${history.length}` }],
  };
  const task = { id: 'toy-0', split: 'train', question: 'say 42', answer: '42' };
  const policy = {
    ...scripted([call('echo', { text: 'a' }), call('echo', { text: 'b' }), '<answer>42</answer>']),
    act: async (req: { messages: readonly Message[]; turn: number }) => {
      seen.push(req.messages.map((m) => m.content));
      return { text: [call('echo', { text: 'a' }), call('echo', { text: 'b' }), '<answer>42</answer>'][req.turn]! };
    },
  };
  const r = await runEpisode({ scenario, task, policy, seed: 1 });
  t.is(r.config.context, undefined);
  t.deepEqual(seen, [
    ['toy', 'say 42'],
    ['toy', 'say 42', 'turns so far: 1'],
    ['toy', 'say 42', 'turns so far: 2'],
  ]);
  t.true((await replayRecord(fromLine(r), scenario)).verified);
  // `concat` overrides the hook, and is then a setting the record keeps.
  t.is(contextSetting(scenario, 'concat'), 'concat');
});

test('window and card contexts stay bounded in tokens however long the episode; concat grows', async (t) => {
  await initBackend('wasm');
  const scenario = grid;
  const texts = (await expertRun(grid, undefined, 2)).records.flatMap((r) => [
    ...r.prompt.map((m) => m.content),
    ...r.turns.flatMap((x) => [x.text, x.observation ?? '']),
  ]);
  const tokenizer = trainTokenizer(texts, { vocabSize: 15 + 256 + 200 });
  const model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 4096, dMlp: 32 },
    5,
  );
  tf.tidy(() => model.tokEmb.assign(model.tokEmb.mul(4)));
  const policy = new TfjsPolicy({ id: 'random-gpt', version: '1', model, tokenizer, sampling: { temperature: 1 } });
  const config = { maxTurns: 30, maxTokensPerTurn: 12, maxTotalTokens: 100_000 };
  const sizes: { [context: string]: number[] } = {};
  let turnTokens = 0; // the most tokens one turn adds to a history (its action, its observation)
  for (const context of ['window:3', 'card', 'concat']) {
    const { records } = await rollout({
      scenario,
      policy,
      split: 'train',
      episodes: 2,
      seed: 9,
      config: { ...config, ...(context === 'concat' ? {} : { context }) },
    });
    const longest = records.reduce((a, b) => (b.turns.length > a.turns.length ? b : a));
    t.true(longest.turns.length >= 25, `${context}: ${longest.turns.length} turns`);
    sizes[context] = shownContexts(longest).map((s) => s.tokens!.length);
    for (const turn of longest.turns)
      turnTokens = Math.max(turnTokens, turn.tokens!.length + (turn.observationTokens?.length ?? 0));
    if (context !== 'concat') {
      t.true(isStepLevel(longest));
      const replay = await replayRecord(fromLine(longest), scenario);
      t.true(replay.verified, JSON.stringify(replay.divergence));
    }
  }
  const prompt = sizes.concat![0]!;
  // A window holds at most 3 turns; a card a few lines and the last turn: bounds that do not grow
  // with the episode, which concatenation passes many times over.
  // (Twice a turn's tokens: a context's messages are encoded anew, and random text may take more ids.)
  const windowBound = prompt + 3 * 2 * turnTokens;
  const cardBound = prompt + 2 * turnTokens + 100;
  t.true(Math.max(...sizes['window:3']!) <= windowBound, `window: ${Math.max(...sizes['window:3']!)} > ${windowBound}`);
  t.true(Math.max(...sizes.card!) <= cardBound, `card: ${Math.max(...sizes.card!)} > ${cardBound}`);
  t.true(sizes.concat!.at(-1)! > 2 * Math.max(...sizes['window:3']!), `concat grows: ${sizes.concat!.at(-1)}`);
  t.log({
    prompt,
    turnTokens,
    window: Math.max(...sizes['window:3']!),
    card: Math.max(...sizes.card!),
    concat: sizes.concat!.at(-1),
  });
  t.is(model.config.contextLength, 4096);
});
