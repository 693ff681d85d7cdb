import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../../src/architectures/gpt/model.ts';
import { TfjsPolicy } from '../../../src/policy/tfjs/tfjs-policy.ts';
import { trainTokenizer } from '../../../src/policy/tfjs/tokenizer.ts';
import type { PolicyRequest } from '../../../src/policy/policy.ts';

const tokenizer = trainTokenizer(
  [
    '<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 2"}}</tool_call>',
    '<answer>3</answer> What is one plus two?',
  ],
  {
    vocabSize: 15 + 256 + 30,
  },
);
let model: GPTModel;
test.before(async () => {
  await initBackend('wasm');
  model = new GPTModel(
    { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 2, nHeads: 4, contextLength: 128, dMlp: 64 },
    4,
  );
  tf.tidy(() => model.shiftGate!.assign(tf.onesLike(model.shiftGate!)));
});

const request = (_p: TfjsPolicy, tokens: number[], turn: number, episodeId = 'ep-1'): PolicyRequest => ({
  episodeId,
  task: { id: 't', split: 'dev', question: 'What is one plus two?' },
  tools: [],
  messages: [],
  tokens,
  turn,
  seed: 1000 + turn,
  maxTokens: 12,
});

test('a second turn reuses the episode cache and gives exactly what a fresh policy gives; release drops it', async (t) => {
  const policy = new TfjsPolicy({ id: 'test', version: 'v', model, tokenizer });
  const fresh = new TfjsPolicy({ id: 'test', version: 'v', model, tokenizer });
  const prompt = policy.encode!.prompt([
    { role: 'system', content: 'Use the calculator.' },
    { role: 'user', content: 'What is one plus two?' },
  ]);
  const first = await policy.act(request(policy, prompt, 0));
  t.is(first.text, tokenizer.decode(first.tokens!));
  t.is(first.tokens!.length, first.logprobs!.length);
  t.true(policy.cachedBytes > 0);
  const history = [...prompt, ...first.tokens!, ...policy.encode!.observation('3')];
  const second = await policy.act(request(policy, history, 1));
  const reference = await fresh.act(request(fresh, history, 1));
  t.deepEqual(second, reference);
  policy.release('ep-1');
  t.is(policy.cachedBytes, 0);
});

test('actBatch: each request is answered as if alone', async (t) => {
  const policy = new TfjsPolicy({ id: 'test', version: 'v', model, tokenizer });
  const prompts = [3, 7, 12].map((n) => tokenizer.encode('What is one plus two? '.repeat(n)));
  const batch = await policy.actBatch(prompts.map((p, i) => request(policy, p, 0, `ep-${i}`)));
  for (const [i, p] of prompts.entries()) {
    const alone = await new TfjsPolicy({ id: 'test', version: 'v', model, tokenizer }).act(
      request(policy, p, 0, `ep-${i}`),
    );
    t.deepEqual(batch[i], alone);
  }
});
