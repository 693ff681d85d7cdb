import test from 'ava';
import fc from 'fast-check';
import { parseAction } from '../../src/parse/parse-action.ts';

const good: Array<[string, string, unknown]> = [
  [
    'one call',
    '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>',
    { kind: 'tool_calls', calls: [{ name: 'search', arguments: { query: 'x' } }] },
  ],
  [
    'whitespace and text around',
    'Let me look.\n<tool_call>\n  {"name":"search","arguments":{"query":"x"}}\n</tool_call>\n',
    { kind: 'tool_calls', calls: [{ name: 'search', arguments: { query: 'x' } }] },
  ],
  [
    'arguments as a JSON string',
    '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>',
    { kind: 'tool_calls', calls: [{ name: 'f', arguments: { a: 1 } }] },
  ],
  [
    'no arguments',
    '<tool_call>{"name": "f"}</tool_call>',
    { kind: 'tool_calls', calls: [{ name: 'f', arguments: {} }] },
  ],
  [
    'two calls',
    '<tool_call>{"name": "a", "arguments": {}}</tool_call> then <tool_call>{"name": "b", "arguments": {"k": [1]}}</tool_call>',
    {
      kind: 'tool_calls',
      calls: [
        { name: 'a', arguments: {} },
        { name: 'b', arguments: { k: [1] } },
      ],
    },
  ],
  ['an answer', 'So: <answer> Paris </answer>', { kind: 'answer', text: 'Paris' }],
  ['a multi-line answer', '<answer>line 1\nline 2</answer>', { kind: 'answer', text: 'line 1\nline 2' }],
];

for (const [name, text, expected] of good) {
  test(`parses ${name}`, (t) => t.deepEqual(parseAction(text), expected as never));
}

const bad: Array<[string, string, RegExp]> = [
  ['bad JSON', '<tool_call>{"name": "a",}</tool_call>', /invalid JSON in <tool_call>/],
  ['an unclosed call', '<tool_call>{"name": "a"}', /unclosed <tool_call> tag/],
  ['an unclosed answer', '<answer>Paris', /unclosed <answer> tag/],
  ['a stray closing tag', '{"name": "a"}</tool_call>', /<\/tool_call> without an opening <tool_call>/],
  ['a missing name', '<tool_call>{"arguments": {}}</tool_call>', /no "name"/],
  ['an empty name', '<tool_call>{"name": "  "}</tool_call>', /no "name"/],
  ['a JSON array', '<tool_call>[1, 2]</tool_call>', /must hold a JSON object/],
  [
    'arguments that are a number',
    '<tool_call>{"name": "a", "arguments": 3}</tool_call>',
    /"arguments" of a must be a JSON object/,
  ],
  [
    'arguments as a broken JSON string',
    '<tool_call>{"name": "a", "arguments": "{x"}</tool_call>',
    /is a string that is not valid JSON/,
  ],
  ['neither a call nor an answer', 'The answer is 4.', /neither a <tool_call> nor an <answer>/],
  ['an empty action', '', /neither a <tool_call> nor an <answer>/],
  [
    'both a call and an answer',
    '<tool_call>{"name": "a"}</tool_call><answer>1</answer>',
    /both <tool_call> and <answer>/,
  ],
  ['two answers', '<answer>1</answer><answer>2</answer>', /2 <answer> tags/],
  ['an empty answer', '<answer>  </answer>', /the <answer> is empty/],
  ['nested calls', '<tool_call><tool_call>{"name":"a"}</tool_call></tool_call>', /nested <tool_call>/],
  [
    'the second of two calls broken',
    '<tool_call>{"name": "a"}</tool_call><tool_call>{</tool_call>',
    /tool call 2: invalid JSON/,
  ],
];

for (const [name, text, pattern] of bad) {
  test(`rejects ${name} with an error naming the problem`, (t) => {
    const result = parseAction(text);
    t.is(result.kind, 'invalid');
    t.regex((result as { error: string }).error, pattern);
  });
}

test('never throws and always returns one of the three kinds, for any string', (t) => {
  const tagged = fc.array(
    fc.oneof(
      fc.string(),
      fc.constantFrom(
        '<tool_call>',
        '</tool_call>',
        '<answer>',
        '</answer>',
        '{"name": "a", "arguments": {}}',
        '{',
        '"',
        '}',
      ),
    ),
    { maxLength: 12 },
  );
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ unit: 'binary' }),
        tagged.map((parts) => parts.join('')),
      ),
      (text) => {
        const result = parseAction(text);
        return ['tool_calls', 'answer', 'invalid'].includes(result.kind);
      },
    ),
    { numRuns: 3000 },
  );
  t.pass();
});

test('a value that is not a string is invalid, not a crash', (t) => {
  t.is(parseAction(undefined as unknown as string).kind, 'invalid');
});

test('arguments nested deeper than 64 levels are invalid (a million deep included), 64 are fine', (t) => {
  const nest = (depth: number) => `${'['.repeat(depth - 1)}1${']'.repeat(depth - 1)}`;
  const call = (depth: number) => `<tool_call>{"name": "f", "arguments": {"x": ${nest(depth)}}}</tool_call>`;
  t.is(parseAction(call(64)).kind, 'tool_calls');
  for (const depth of [65, 1_000_000])
    t.deepEqual(parseAction(call(depth)), { kind: 'invalid', error: '"arguments" of f nest deeper than 64 levels' });
});

test('arguments keep the key order the model wrote them in (the OpenAI server passes them on as they are)', (t) => {
  const action = parseAction('<tool_call>{"name": "f", "arguments": {"b": 1, "a": {"d": 2, "c": 3}}}</tool_call>');
  t.is(action.kind, 'tool_calls');
  if (action.kind === 'tool_calls') t.is(JSON.stringify(action.calls[0]!.arguments), '{"b":1,"a":{"d":2,"c":3}}');
});

// A model's own tool-call syntax (EpisodeConfig.actionFormat): a turn without a call is the answer.

const hermes: Array<[string, string, unknown]> = [
  [
    'a call (Qwen)',
    '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>',
    { kind: 'tool_calls', calls: [{ name: 'add', arguments: { a: 1 } }] },
  ],
  [
    'parallel calls after reasoning',
    '<think>two sums</think>\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {"x": "ü"}}\n</tool_call>',
    {
      kind: 'tool_calls',
      calls: [
        { name: 'a', arguments: {} },
        { name: 'b', arguments: { x: 'ü' } },
      ],
    },
  ],
  ['plain text is the answer', '  The sum is 4.  ', { kind: 'answer', text: 'The sum is 4.' }],
  ['the reasoning is not part of the answer', '<think>\n2+2\n</think>\n\n4', { kind: 'answer', text: '4' }],
  ['an <answer> tag still gives its content', 'So: <answer>4</answer>', { kind: 'answer', text: '4' }],
];

for (const [name, text, expected] of hermes) {
  test(`hermes: ${name}`, (t) => t.deepEqual(parseAction(text, 'hermes'), expected as never));
}

test('hermes: an empty turn, or one of reasoning only, is invalid; a broken call is invalid, not an answer', (t) => {
  t.is(parseAction('   ', 'hermes').kind, 'invalid');
  t.is(parseAction('<think>hmm</think>', 'hermes').kind, 'invalid');
  const broken = parseAction('<tool_call>{"name": "a", "arguments": {</tool_call>', 'hermes');
  t.like(broken, { kind: 'invalid' });
  t.regex((broken as { error: string }).error, /invalid JSON in <tool_call>/);
  t.like(parseAction('<tool_call>{"name": "a"}', 'hermes'), {
    kind: 'invalid',
    error: 'unclosed <tool_call> tag (expected </tool_call>)',
  });
});

const llama3: Array<[string, string, unknown]> = [
  [
    'a call with "parameters"',
    '{"name": "add", "parameters": {"a": 1, "b": 2}}',
    { kind: 'tool_calls', calls: [{ name: 'add', arguments: { a: 1, b: 2 } }] },
  ],
  [
    'after <|python_tag|>',
    '<|python_tag|>{"name": "f", "arguments": {"q": "x"}}',
    { kind: 'tool_calls', calls: [{ name: 'f', arguments: { q: 'x' } }] },
  ],
  [
    'parallel calls as an array',
    '[{"name": "a", "parameters": {}}, {"name": "b", "parameters": {"k": [1]}}]',
    {
      kind: 'tool_calls',
      calls: [
        { name: 'a', arguments: {} },
        { name: 'b', arguments: { k: [1] } },
      ],
    },
  ],
  ['text is the answer', 'It is 4.', { kind: 'answer', text: 'It is 4.' }],
];

for (const [name, text, expected] of llama3) {
  test(`llama3-json: ${name}`, (t) => t.deepEqual(parseAction(text, 'llama3-json'), expected as never));
}

test('llama3-json: a turn that opens like a call but is not one is invalid, and says why', (t) => {
  t.like(parseAction('{"name": "add", "parameters": {', 'llama3-json'), { kind: 'invalid' });
  t.like(parseAction('{"parameters": {}}', 'llama3-json'), {
    kind: 'invalid',
    error: 'the tool call has no "name" (a non-empty string)',
  });
  t.like(parseAction('[]', 'llama3-json'), { kind: 'invalid', error: 'the tool call array is empty' });
  t.like(parseAction('[{"name": "a"}, 3]', 'llama3-json'), {
    kind: 'invalid',
    error: 'tool call 2: the tool call has no "name" (a non-empty string)',
  });
  t.like(parseAction('{"name": "a", "parameters": [1]}', 'llama3-json'), {
    kind: 'invalid',
    error: '"arguments" of a must be a JSON object',
  });
});

test('the default format (tags) is unchanged: text without a tag is invalid', (t) => {
  t.is(parseAction('The sum is 4.').kind, 'invalid');
  t.deepEqual(parseAction('<answer>4</answer>'), { kind: 'answer', text: '4' });
});
