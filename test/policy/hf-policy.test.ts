import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import type { EpisodeRecord, Message } from '../../src/core/types.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { loadHfPolicy, type HfPolicy } from '../../src/policy/hf/hf-policy.ts';
import { replayRecord } from '../../src/replay/replay.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

let root: string;
let policy: HfPolicy;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-policy-'));
  const dir = join(root, 'qwen3');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 48,
    seed: 3,
  });
  policy = await loadHfPolicy(dir);
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/**
 * What the policy was shown before each turn of a record (the prompt, then each turn's sampled ids
 * and observation ids), beside tokenize(render(the messages so far)).
 */
function conditionedAndRendered(record: EpisodeRecord, p: HfPolicy, tools = openAITools(scenario)) {
  const out: Array<{ turn: number; ids: number[]; rendered: number[]; driftBefore: boolean }> = [];
  const ids = [...record.promptTokens!];
  const messages: Message[] = [...record.prompt];
  let drift = false;
  for (const turn of record.turns) {
    out.push({ turn: turn.index, ids: ids.slice(), rendered: p.encode.prompt(messages, tools), driftBefore: drift });
    ids.push(...turn.tokens!, ...(turn.observationTokens ?? []));
    messages.push({ role: 'assistant', content: turn.text });
    if (turn.observation !== null) messages.push({ role: 'tool', content: turn.observation });
    drift ||= turn.tokenDrift !== undefined;
  }
  return out;
}

let scenario: Awaited<ReturnType<typeof loadScenario>>;
test.before(async () => {
  scenario = await loadScenario('calculator', builtinScenarios, {});
});

test('no re-tokenization drift: an expert writing through the template conditions every turn on tokenize(render(messages so far))', async (t) => {
  const expert = await referencePolicy(scenario, 'expert', 0);
  // The calculator's expert, its actions written as the model would write them (ids + end of turn).
  const writer: Policy = {
    id: 'expert-in-qwen3-template',
    version: '1',
    encode: policy.encode,
    actionFormat: 'hermes',
    act: async (request) => {
      const { text } = await expert.act(request);
      return { text, tokens: policy.encode.action(text) };
    },
  };
  const { records } = await rollout({ scenario, policy: writer, split: 'train', episodes: 6, seed: 1 });
  let turns = 0;
  for (const record of records) {
    t.true(record.outcome.success, `${record.episodeId} succeeds`);
    t.is(record.config.actionFormat, 'hermes');
    for (const step of conditionedAndRendered(record, policy)) {
      t.deepEqual(step.ids, step.rendered, `${record.episodeId} turn ${step.turn}`);
      turns++;
    }
  }
  t.true(turns >= 12, `${turns} turns checked`);
});

test("the model's own turns: ids equal tokenize(render) wherever no earlier turn's text re-encodes otherwise, and the record says where it does", async (t) => {
  // Random weights call no tool, so the tags format (an answer needs <answer>) keeps episodes going:
  // every turn gets an error observation, in the template, to the turn limit.
  const { records } = await rollout({
    scenario,
    policy,
    split: 'train',
    episodes: 4,
    seed: 2,
    config: { actionFormat: 'tags', maxTurns: 4, maxTokensPerTurn: 12 },
  });
  let exact = 0;
  for (const record of records) {
    t.is(record.turns.length, 4);
    for (const turn of record.turns) {
      // The field means what it says: the text's own ids are the sampled ids up to it, and only there.
      const body = turn.tokens!.at(-1) === 151645 ? turn.tokens!.slice(0, -1) : turn.tokens!;
      const again = policy.encode.tokenizer.encode(turn.text);
      if (turn.tokenDrift === undefined) t.deepEqual(again, body);
      else {
        t.deepEqual(again.slice(0, turn.tokenDrift), body.slice(0, turn.tokenDrift));
        t.not(again[turn.tokenDrift], body[turn.tokenDrift]);
      }
    }
    for (const step of conditionedAndRendered(record, policy)) {
      if (!step.driftBefore) {
        t.deepEqual(step.ids, step.rendered, `${record.episodeId} turn ${step.turn}`);
        exact++;
      } else t.notDeepEqual(step.ids, step.rendered);
    }
    // The history is the sampled ids: a turn cut by the budget has the template's end of turn after it.
    const first = record.turns[0]!;
    t.is(policy.encode.tokenizer.decode(first.observationTokens!.slice(0, 1)), '<|im_end|>');
    t.true((await replayRecord(record, scenario)).verified);
  }
  // Beyond each episode's first turn (the prompt alone): histories with sampled turns in them.
  t.true(exact > records.length, `${exact} turns exact`);
});

test('a second turn reuses the episode cache and samples what a fresh policy samples', async (t) => {
  const fresh = await loadHfPolicy(policy.folder.dir);
  const messages: Message[] = [{ role: 'user', content: 'Count: 1 2 3' }];
  const request = (tokens: number[], turn: number) => ({
    episodeId: 'e',
    task: { id: 't', split: 'train', question: 'q' },
    tools: [],
    messages,
    tokens,
    turn,
    seed: 40 + turn,
    maxTokens: 6,
  });
  const prompt = policy.encode.prompt(messages);
  const first = await policy.act(request(prompt, 0));
  const second = [...prompt, ...first.tokens!, ...policy.encode.observation('ok', first.tokens)];
  const cached = await policy.act(request(second, 1));
  const uncached = await fresh.act(request(second, 1));
  t.deepEqual(cached, uncached);
  t.deepEqual(cached.tokens!.length, 6);
});
