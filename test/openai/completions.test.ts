import test from 'ava';
import type { Task } from '../../src/core/types.ts';
import { ChatCompletions } from '../../src/openai/completions.ts';
import { OpenAIHttpError } from '../../src/openai/errors.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import type { ChatCompletionRequest } from '../../src/openai/wire.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { calc, calculatorCheckpoint } from './fixtures.ts';

const MODEL = 'calc-tiny';
let completions: ChatCompletions;

test.before(async () => {
  const { dir } = await calculatorCheckpoint();
  const policy = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
  completions = new ChatCompletions({ policy, modelName: MODEL, maxWaitMs: 5 });
});

test.after.always(() => completions?.close());

const task = (calc.tasks({ split: 'train', seed: 0, count: 1 }) as Task[])[0]!;
const messages = calc.env.prompt(task, openAITools(calc));
const request = (over: Partial<ChatCompletionRequest> = {}) =>
  ({ model: MODEL, messages, temperature: 0, max_tokens: 40, ...over }) as ChatCompletionRequest;

test('a completion without HTTP: the answer, its usage and finish reason; stop strings cut it', async (t) => {
  const plain = await completions.complete(request());
  const text = plain.choices[0]!.message.content!;
  t.regex(text, /^<tool_call>/);
  t.is(plain.usage.completion_tokens, plain.choices[0]!.token_ids!.length);
  t.is(plain.usage.total_tokens, plain.usage.prompt_tokens + plain.usage.completion_tokens);
  const cut = await completions.complete(request({ stop: ['"arguments"', 'calculate'] }));
  const first = Math.min(text.indexOf('"arguments"'), text.indexOf('calculate'));
  t.is(cut.choices[0]!.message.content, text.slice(0, first));
  t.is(cut.choices[0]!.finish_reason, 'stop');
  t.true(cut.usage.completion_tokens <= plain.usage.completion_tokens);
  const stats = completions.stats();
  t.true(stats.rows >= 2);
});

test('a request for another model, or past the context, is an OpenAI error', async (t) => {
  await t.throwsAsync(() => completions.complete(request({ model: 'gpt-4o' })), {
    instanceOf: OpenAIHttpError,
    message: /the model "gpt-4o" does not exist; this server serves "calc-tiny"/,
  });
  const long = request({ messages: [{ role: 'user', content: 'x '.repeat(5000) }] });
  const error = await t.throwsAsync(() => completions.complete(long), { instanceOf: OpenAIHttpError });
  t.is(error!.status, 400);
});
