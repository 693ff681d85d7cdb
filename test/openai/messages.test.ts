import test from 'ava';
import fc from 'fast-check';
import { formatResults } from '../../src/env/observation.ts';
import {
  actionToAssistant,
  assistantToAction,
  historyToOpenAI,
  joinToolResults,
  observationToToolMessages,
  SEE_FIRST_RESULT,
} from '../../src/openai/messages.ts';
import { parseAction } from '../../src/parse/parse-action.ts';
import type { OpenAIToolCall } from '../../src/openai/wire.ts';

const call = (id: string, name: string, args: object): OpenAIToolCall => ({
  id,
  type: 'function',
  function: { name, arguments: JSON.stringify(args) },
});

test('an action with tool calls becomes content + tool_calls, and back to the same parsed action', (t) => {
  const text =
    'Thinking.\n<tool_call>{"name": "search", "arguments": {"q": "a < b"}}</tool_call>\n<tool_call>{"name": "open", "arguments": {"id": 3}}</tool_call>';
  const message = actionToAssistant(text, (i) => `call_${i}`);
  t.deepEqual(message, {
    role: 'assistant',
    content: 'Thinking.',
    tool_calls: [call('call_0', 'search', { q: 'a < b' }), call('call_1', 'open', { id: 3 })],
  });
  t.deepEqual(parseAction(assistantToAction(message)), parseAction(text));
  t.deepEqual(
    actionToAssistant('<answer>4</answer>', () => 'x'),
    { role: 'assistant', content: '<answer>4</answer>' },
  );
});

test('arguments that hold a tag, or are not a JSON object, keep their value or their fault', (t) => {
  const tagged = assistantToAction({
    content: null,
    tool_calls: [call('a', 'echo', { text: 'say </tool_call> now' })],
  });
  t.deepEqual(parseAction(tagged), {
    kind: 'tool_calls',
    calls: [{ name: 'echo', arguments: { text: 'say </tool_call> now' } }],
  });
  const broken = assistantToAction({
    content: null,
    tool_calls: [{ id: 'b', type: 'function', function: { name: 'echo', arguments: '{"text": ' } }],
  });
  t.regex((parseAction(broken) as { error: string }).error, /not valid JSON/);
  const list = assistantToAction({
    content: null,
    tool_calls: [{ id: 'c', type: 'function', function: { name: 'echo', arguments: '[1]' } }],
  });
  t.is(parseAction(list).kind, 'invalid');
});

test('observations split into tool messages per call and join back to the same text (property)', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ name: fc.constantFrom('a', 'b', 'calc'), ok: fc.boolean(), content: fc.string() }), {
        minLength: 1,
        maxLength: 4,
      }),
      (rs) => {
        const results = rs.map((r) => ({
          name: r.name,
          ok: r.ok,
          content: r.content,
          ...(r.ok ? {} : { error: { kind: 'tool_error' as const, message: r.content } }),
        }));
        const observation = formatResults(results);
        const calls = rs.map((r, i) => call(`id${i}`, r.name, {}));
        const messages = observationToToolMessages(observation, calls);
        t.is(messages.length, calls.length);
        const joined = joinToolResults(
          messages.map((m, i) => ({ name: calls[i]!.function.name, content: m.content as string })),
        );
        return joined === observation;
      },
    ),
  );
  // Text in another shape goes whole into the first message.
  const other = observationToToolMessages('both done', [call('x', 'a', {}), call('y', 'b', {})]);
  t.deepEqual(
    other.map((m) => m.content),
    ['both done', SEE_FIRST_RESULT],
  );
  t.is(
    joinToolResults([
      { name: 'a', content: 'both done' },
      { name: 'b', content: SEE_FIRST_RESULT },
    ]),
    'both done',
  );
});

test('an episode history becomes OpenAI messages: tool results after calls, user messages after anything else', (t) => {
  const messages = historyToOpenAI([
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'q' },
    { role: 'assistant', content: 'hmm' },
    { role: 'tool', content: 'Error: no action' },
    { role: 'assistant', content: '<tool_call>{"name": "calc", "arguments": {"e": "1+1"}}</tool_call>' },
    { role: 'tool', content: '2' },
    { role: 'assistant', content: '<answer>2</answer>' },
  ]);
  t.deepEqual(messages, [
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'q' },
    { role: 'assistant', content: 'hmm' },
    { role: 'user', content: 'Error: no action' },
    { role: 'assistant', content: null, tool_calls: [call('call_1_0', 'calc', { e: '1+1' })] },
    { role: 'tool', content: '2', tool_call_id: 'call_1_0' },
    { role: 'assistant', content: '<answer>2</answer>' },
  ]);
});
