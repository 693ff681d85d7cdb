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
