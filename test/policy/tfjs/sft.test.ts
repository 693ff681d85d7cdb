import test from 'ava';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { chatEncoding } from '../../../src/policy/tfjs/chat-template.ts';
import {
  recordTexts,
  SftContextError,
  SftError,
  sequencesFromRecords,
  trainSft,
} from '../../../src/policy/tfjs/sft.ts';
import { runSft } from '../../../src/app/run-sft.ts';
import { trainTokenizer } from '../../../src/policy/tfjs/tokenizer.ts';
import { loadScenario } from '../../../src/scenario/load.ts';
import { rollout } from '../../../src/rollout/rollout.ts';
import { resolvePolicy } from '../../../src/app/resolve-policy.ts';
import { builtinScenarios } from '../../../scenarios/index.ts';

test.before(async () => {
  await initBackend('wasm');
});

test('training sequences: the loss mask covers exactly the agent’s own tokens, built as live play builds them', async (t) => {
  const scenario = await loadScenario('calculator', builtinScenarios);
  const expert = await resolvePolicy('expert', scenario, 0);
  const { records } = await rollout({ scenario, policy: expert, split: 'train', episodes: 20, seed: 3 });
  const tok = trainTokenizer(recordTexts(records), { vocabSize: 600 });
  const enc = chatEncoding(tok);
  const seqs = sequencesFromRecords(records, enc);
  t.is(seqs.length, 20);
  const r = records[0]!;
  const s = seqs[0]!;
  const agent = s.tokens.filter((_, i) => s.mask[i] === 1);
  t.is(tok.decode(agent), r.turns.map((x) => x.text).join(''));
  // The same chain as the episode machine: prompt, action, observation in the template, action, end.
  const expected = [
    ...enc.prompt(r.prompt),
    ...enc.action(r.turns[0]!.text),
    ...enc.observation(r.turns[0]!.observation!),
    ...enc.action(r.turns[1]!.text),
    ...enc.end!(),
  ];
  t.deepEqual(s.tokens, expected);
  await t.throwsAsync(() => trainSft({ records: [] }), { instanceOf: SftError, message: /no records/ });
  await t.throwsAsync(() => trainSft({ records, tokenizer: tok, steps: 0 }), {
    instanceOf: SftError,
    message: /steps/,
  });
});

// A small budget that still shows learning: a 1-layer d32 model with a copy head (and word tokens,
// which it can copy) goes from nothing to most dev answers right in 150 steps (~12 s on an idle core;
// measured 68% greedy), in whole-batch steps (one micro-batch of 8 takes half the time of eight of one).
// The full-strength run (agent-r1 sft's recipe: 400 episodes, 600 steps, > 85%) is sft.slow.test.ts.
test('SFT on the calculator (100 expert episodes, 150 steps, d32 × 1 layer with a copy head) brings greedy dev success above 50%', async (t) => {
  t.timeout(3 * 60_000);
  const scenario = await loadScenario('calculator', builtinScenarios);
  const teacher = await resolvePolicy('expert', scenario, 0);
  const result = await runSft({
    scenario,
    teacher,
    episodes: 100,
    seed: 1,
    evalEpisodes: 50,
    sampling: { temperature: 0 },
    train: {
      steps: 150,
      batchSize: 8,
      microBatch: 8,
      lr: 1e-2,
      model: { dModel: 32, nLayers: 1, copyHead: true },
      chunking: 'words',
    },
  });
  t.log(
    `train ${result.seconds.toFixed(1)} s, tail loss ${result.tailLoss.toFixed(4)}, dev success ${result.eval!.successRate}`,
  );
  t.is(result.teacherSuccess, 1);
  t.true(result.tailLoss < 0.2, `tail loss ${result.tailLoss}`);
  t.true(result.eval!.successRate > 0.5, `dev success ${result.eval!.successRate}`);
  t.regex(result.hash, /^[0-9a-f]{64}$/);
});

test('sequences longer than the context: cut and counted by default, refused with the context that holds them all', async (t) => {
  const scenario = await loadScenario('calculator', builtinScenarios);
  const expert = await resolvePolicy('expert', scenario, 0);
  const { records } = await rollout({ scenario, policy: expert, split: 'train', episodes: 6, seed: 3 });
  const tok = trainTokenizer(recordTexts(records), { vocabSize: 600 });
  const lengths = sequencesFromRecords(records, chatEncoding(tok)).map((q) => q.tokens.length);
  const longest = Math.max(...lengths);
  // A context between the shortest and the longest sequence: some are cut, not all.
  const contextLength = Math.min(...lengths) + 1;
  const over = lengths.filter((n) => n > contextLength).length;
  t.true(over > 0 && over < lengths.length, `${lengths}`);
  const small = { records, tokenizer: tok, steps: 1, model: { dModel: 16, nLayers: 1, nHeads: 2, contextLength } };
  const cut = await trainSft(small);
  t.deepEqual(cut.cut, { sequences: over, of: 6, longest, contextLength });
  const refused = await t.throwsAsync(() => trainSft({ ...small, overContext: 'refuse' }), {
    instanceOf: SftContextError,
  });
  t.is(
    refused!.message,
    `${over} of 6 training sequences are longer than the context of ${contextLength} tokens (the longest: ${longest} tokens, ` +
      `${longest - contextLength} over); cut, they would lose their last actions: give the model a context of at least ${longest} tokens`,
  );
  // A context shorter than every prompt leaves no agent token at all: the context is named as the cause.
  await t.throwsAsync(() => trainSft({ ...small, model: { ...small.model, contextLength: 32 } }), {
    instanceOf: SftContextError,
    message: /^6 of 6 training sequences are longer than the context of 32 tokens/,
  });
  const fits = await trainSft({ ...small, model: { ...small.model, contextLength: longest } });
  t.is(fits.cut, undefined);
});
