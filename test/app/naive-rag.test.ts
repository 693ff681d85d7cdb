import test from 'ava';
import { createMultihopQaScenario } from '../../scenarios/multihop-qa/index.ts';
import { naiveRagModel } from '../../src/app/naive-rag.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import { TfjsPolicy } from '../../src/policy/tfjs/tfjs-policy.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { rollout } from '../../src/rollout/rollout.ts';

test('Naive RAG on a model searches once, with the question as the query, then answers from that observation', async (t) => {
  await initBackend('wasm');
  const scenario = createMultihopQaScenario();
  const tasks = await scenario.tasks({ split: 'test', seed: 0, count: 40 });
  const tokenizer = trainTokenizer(
    tasks.map((task) => task.question),
    { vocabSize: 15 + 256 + 60 },
  );
  const model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 1, nHeads: 2, contextLength: 512, dMlp: 64 },
    3,
  );
  const inner = new TfjsPolicy({ id: 'tiny', version: 'v0', model, tokenizer, sampling: { temperature: 0 } });
  const policy = naiveRagModel(inner);
  const { records } = await rollout({
    scenario,
    policy,
    split: 'test',
    episodes: 6,
    seed: 1,
    config: { maxTurns: 3, maxTokensPerTurn: 256 },
  });
  t.is(records.length, 6);
  for (const r of records) {
    const [first, ...rest] = r.turns;
    t.deepEqual(first!.action, {
      kind: 'tool_calls',
      calls: [{ name: 'search', arguments: { query: r.task.question } }],
    });
    t.true(first!.results[0]!.ok, 'the search ran');
    t.truthy(first!.observation, 'its result is the observation the model reads');
    t.true(rest.length >= 1);
    for (const turn of rest) t.true(turn.text.startsWith('<answer>'), `turn ${turn.index}: ${turn.text}`);
    const searches = r.turns.flatMap((turn) => (turn.action.kind === 'tool_calls' ? turn.action.calls : []));
    t.is(searches.length, 1, 'one retrieval, no more');
    t.is(r.policy.version, 'v0+naive-rag');
  }
  // What follows `<answer>` is the (untrained) model's: it may not close the tag within the budget.
  t.true(records.every((r) => ['answered', 'max_turns', 'max_tokens'].includes(r.endReason)));
});
