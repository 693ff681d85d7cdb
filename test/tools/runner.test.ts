import test from 'ava';
import { z } from 'zod';
import { createRng } from '../../src/core/rng.ts';
import { createToolCache, ToolRunner } from '../../src/tools/runner.ts';
import { tool, toOpenAITool } from '../../src/tools/tool.ts';

const task = { id: 't', split: 'train', question: 'q' };
const ctx = { task, rng: createRng(1), state: undefined };

test('a tool exports the OpenAI function shape with a JSON schema from zod', (t) => {
  const search = tool({
    name: 'search',
    description: 'find documents',
    parameters: z.object({ query: z.string().describe('words'), k: z.number().int().min(1).optional() }),
    execute: () => [],
  });
  t.deepEqual(toOpenAITool(search), {
    type: 'function',
    function: {
      name: 'search',
      description: 'find documents',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'words' },
          k: { type: 'integer', minimum: 1, maximum: 9007199254740991 },
        },
        required: ['query'],
        additionalProperties: false,
      },
    },
  });
});

test('a tool name that an API would reject is refused at declaration', (t) => {
  t.throws(() => tool({ name: 'no spaces', description: '', parameters: z.object({}), execute: () => null }), {
    message: /must be 1-64 letters/,
  });
});

test('cacheable tools are cached by tool and canonical arguments; others always run', async (t) => {
  let pure = 0;
  let impure = 0;
  const tools = [
    tool({
      name: 'pure',
      description: '',
      parameters: z.object({ a: z.number(), b: z.number() }),
      cacheable: true,
      execute: ({ a, b }) => {
        pure++;
        return a + b;
      },
    }),
    tool({
      name: 'impure',
      description: '',
      parameters: z.object({ a: z.number() }),
      execute: ({ a }) => {
        impure++;
        return a;
      },
    }),
  ];
  const runner = new ToolRunner(tools, { timeoutMs: 1000, maxOutputChars: 100, cache: createToolCache() });
  const first = await runner.run({ name: 'pure', arguments: { a: 1, b: 2 } }, ctx);
  const again = await runner.run({ name: 'pure', arguments: { b: 2, a: 1 } }, ctx);
  const other = await runner.run({ name: 'pure', arguments: { a: 2, b: 2 } }, ctx);
  t.deepEqual(first, again);
  t.is(first.content, '3');
  t.is(other.content, '4');
  t.is(pure, 2);
  await runner.run({ name: 'impure', arguments: { a: 1 } }, ctx);
  await runner.run({ name: 'impure', arguments: { a: 1 } }, ctx);
  t.is(impure, 2);
});

test('structured output is kept as data and shown as JSON; undefined becomes null', async (t) => {
  const tools = [
    tool({ name: 'obj', description: '', parameters: z.object({}), execute: () => ({ hits: [1, 2] }) }),
    tool({ name: 'nothing', description: '', parameters: z.object({}), execute: () => undefined as never }),
  ];
  const runner = new ToolRunner(tools, { timeoutMs: 1000, maxOutputChars: 100 });
  const r = await runner.run({ name: 'obj', arguments: {} }, ctx);
  t.deepEqual(r.data, { hits: [1, 2] });
  t.is(r.content, '{"hits":[1,2]}');
  t.is((await runner.run({ name: 'nothing', arguments: {} }, ctx)).content, 'null');
});

test('a failed call is not cached', async (t) => {
  let calls = 0;
  const flaky = tool({
    name: 'flaky',
    description: '',
    parameters: z.object({}),
    cacheable: true,
    execute: () => {
      calls++;
      if (calls === 1) throw new Error('first call fails');
      return 'ok';
    },
  });
  const runner = new ToolRunner([flaky], { timeoutMs: 1000, maxOutputChars: 100, cache: createToolCache() });
  t.false((await runner.run({ name: 'flaky', arguments: {} }, ctx)).ok);
  t.true((await runner.run({ name: 'flaky', arguments: {} }, ctx)).ok);
});

test('the abort signal reaches the tool when it times out', async (t) => {
  let aborted = false;
  const slow = tool({
    name: 'slow',
    description: '',
    parameters: z.object({}),
    execute: (_a, c) =>
      new Promise((resolve) => {
        c.signal.addEventListener('abort', () => {
          aborted = true;
          resolve('late');
        });
      }),
  });
  const runner = new ToolRunner([slow], { timeoutMs: 20, maxOutputChars: 100 });
  const r = await runner.run({ name: 'slow', arguments: {} }, ctx);
  t.is(r.error?.kind, 'timeout');
  t.true(aborted);
});

test("the run's abort reaches the tool, whether it read its signal before the abort or after", async (t) => {
  const outer = new AbortController();
  const reasons: unknown[] = [];
  const waiting = tool({
    name: 'waiting',
    description: '',
    parameters: z.object({ late: z.boolean() }),
    execute: ({ late }, c) =>
      new Promise((resolve) => {
        const stop = () => {
          reasons.push(c.signal.reason);
          resolve('stopped');
        };
        const listen = () => {
          if (c.signal.aborted) stop();
          else c.signal.addEventListener('abort', stop);
        };
        if (late) setTimeout(listen, 30);
        else listen();
      }),
  });
  const runner = new ToolRunner([waiting], { timeoutMs: 5000, maxOutputChars: 100 });
  const early = runner.run({ name: 'waiting', arguments: { late: false } }, { ...ctx, signal: outer.signal });
  const late = runner.run({ name: 'waiting', arguments: { late: true } }, { ...ctx, signal: outer.signal });
  setTimeout(() => outer.abort(new Error('stopped by the run')), 10);
  t.deepEqual(
    (await Promise.all([early, late])).map((r) => r.content),
    ['stopped', 'stopped'],
  );
  t.deepEqual(
    reasons.map((r) => (r as Error).message),
    ['stopped by the run', 'stopped by the run'],
  );
});
