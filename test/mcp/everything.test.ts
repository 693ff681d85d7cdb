import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { createRng, ToolRunner, type Task } from 'agent-r1-ts';
import { McpServer, mcpTools, McpStartError, McpCatalogError } from 'agent-r1-ts/mcp';

// The SDK's own test server (@modelcontextprotocol/server-everything), over stdio and Streamable
// HTTP, and a small SDK server of ours that pages its tool list (the everything server lists its
// tools in one page).

const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
const PAGED = fileURLToPath(new URL('../fixtures/mcp/paged-server.mjs', import.meta.url));
const task: Task = { id: 't', split: 'train', question: '' };
const ctx = { task, rng: createRng(0), state: undefined };

const everything = () =>
  new McpServer({ command: process.execPath, args: [EVERYTHING, 'stdio'], label: 'everything', isolation: 'shared' });

test('tools listed page by page (nextCursor), in order; a server whose cursor never ends is refused', async (t) => {
  const paged = new McpServer({ command: process.execPath, args: [PAGED], isolation: 'shared' });
  const { tools, server } = await mcpTools(paged);
  t.deepEqual(server, { name: 'paged-fixture', version: '1.2.3' });
  t.deepEqual(
    tools.map((x) => x.name),
    ['alpha', 'beta', 'gamma', 'delta', 'epsilon'],
  );
  const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 100 });
  t.like(await runner.run({ name: 'delta', arguments: {} }, ctx), { ok: true, content: 'delta' });
  await paged.close();
  const looping = new McpServer({
    command: process.execPath,
    args: [PAGED, '--loop'],
    label: 'loop',
    isolation: 'shared',
  });
  const err = await t.throwsAsync(mcpTools(looping), { instanceOf: McpStartError });
  t.regex(err!.message, /tools\/list returned the cursor "0" twice/);
});

test('a server that never answers initialize is reported as such, not as a process that exited', async (t) => {
  const silent = new McpServer({
    command: process.execPath,
    args: ['-e', 'setInterval(() => {}, 1000)'],
    label: 'silent',
    isolation: 'shared',
    startTimeoutMs: 1000,
  });
  try {
    const err = await t.throwsAsync(mcpTools(silent), { instanceOf: McpStartError });
    t.regex(err!.message, /it did not answer initialize within 1000 ms, and was stopped/);
    t.notRegex(err!.message, /exited|SIGTERM/);
  } finally {
    await silent.close();
  }
});

test('allow-list, renaming and an unknown name in the allow-list', async (t) => {
  const mcp = everything();
  try {
    const { tools } = await mcpTools(mcp, { include: ['get-sum', 'echo'], rename: { 'get-sum': 'add' } });
    t.deepEqual(
      tools.map((x) => x.name),
      ['add', 'echo'],
    );
    const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 1000 });
    t.like(await runner.run({ name: 'add', arguments: { a: 2, b: 40 } }, ctx), { ok: true });
    t.regex((await runner.run({ name: 'add', arguments: { a: 2, b: 40 } }, ctx)).content, /42/);
    const err = await t.throwsAsync(mcpTools(mcp, { include: ['get-sum', 'sum'] }), { instanceOf: McpCatalogError });
    t.regex(err!.message, /include names tools everything does not have: sum; it has: echo, /);
  } finally {
    await mcp.close();
  }
});

test('structured content is the data; images and resources are named in the text, with their size', async (t) => {
  const mcp = everything();
  try {
    const { tools } = await mcpTools(mcp, {
      include: ['get-structured-content', 'get-tiny-image', 'get-resource-reference', 'get-resource-links'],
    });
    const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 4000 });
    const weather = await runner.run({ name: 'get-structured-content', arguments: { location: 'Chicago' } }, ctx);
    t.true(weather.ok);
    const data = (weather.data as { structuredContent: { [k: string]: unknown } }).structuredContent;
    t.deepEqual(Object.keys(data).sort(), ['conditions', 'humidity', 'temperature']);
    t.deepEqual(JSON.parse(weather.content), data, 'the text block is the same weather');
    const badCity = await runner.run({ name: 'get-structured-content', arguments: { location: 'Paris' } }, ctx);
    t.is(badCity.error?.kind, 'bad_arguments', 'an enum checked before the call');
    const image = await runner.run({ name: 'get-tiny-image', arguments: {} }, ctx);
    t.true(image.ok);
    t.regex(image.content, /\[image image\/png, \d+ bytes\]/);
    t.false(image.content.includes('iVBOR'), 'no base64 in what the agent reads');
    const text = await runner.run(
      { name: 'get-resource-reference', arguments: { resourceType: 'Text', resourceId: 2 } },
      ctx,
    );
    t.regex(
      text.content,
      /^Returning resource reference for Resource 2:\n\[resource \S+2\S*, text\/plain\]\n.+\nYou can access/s,
    );
    const blob = await runner.run(
      { name: 'get-resource-reference', arguments: { resourceType: 'Blob', resourceId: 1 } },
      ctx,
    );
    t.regex(
      blob.content,
      /\[resource demo:\/\/\S+\/blob\/1, text\/plain, \d+ bytes\]/,
      'a blob: named with its size, not pasted',
    );
    const links = await runner.run({ name: 'get-resource-links', arguments: { count: 2 } }, ctx);
    t.is(links.content.match(/\[resource link \S+ "[^"]+"/g)?.length, 2, links.content);
  } finally {
    await mcp.close();
  }
});

test('a long-running call: the runner times it out, or the episode cancels it; the server answers the next call', async (t) => {
  const mcp = everything();
  try {
    const { tools } = await mcpTools(mcp, { include: ['trigger-long-running-operation', 'echo'] });
    const runner = new ToolRunner(tools, { timeoutMs: 300, maxOutputChars: 1000 });
    const long = { name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 4 } };
    let start = performance.now();
    t.like(await runner.run(long, ctx), { ok: false, error: { kind: 'timeout' } });
    t.true(performance.now() - start < 10_000, 'well before the 20 s the operation takes');
    const slow = new ToolRunner(tools, { timeoutMs: 60_000, maxOutputChars: 1000 });
    const stop = new AbortController();
    setTimeout(() => stop.abort(new Error('episode stopped')), 200);
    start = performance.now();
    const cancelled = await slow.run(long, { ...ctx, signal: stop.signal });
    t.is(cancelled.error?.kind, 'tool_error');
    t.regex(cancelled.content, /trigger-long-running-operation failed: .*episode stopped/);
    t.true(performance.now() - start < 10_000, 'well before the 20 s the operation takes');
    t.like(await slow.run({ name: 'echo', arguments: { message: 'still here' } }, ctx), {
      ok: true,
      content: 'Echo: still here',
    });
  } finally {
    await mcp.close();
  }
});

/** A free port on the loopback interface. */
const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

test('Streamable HTTP: a running server by its URL, shared or a session per episode', async (t) => {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      let err = '';
      child.stderr!.on('data', (d) => {
        err += d;
        if (err.includes('listening on port')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`server-everything exited ${code}: ${err}`)));
    });
    const url = `http://127.0.0.1:${port}/mcp`;
    for (const isolation of ['shared', 'episode'] as const) {
      const mcp = new McpServer({ url, isolation });
      const { tools, server } = await mcpTools(mcp, { include: ['echo'] });
      t.is(server.name, 'mcp-servers/everything');
      const lease = await mcp.lease();
      const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 1000 });
      const { McpEpisode } = await import('agent-r1-ts/mcp');
      const state = { mcp: new McpEpisode(mcp, {}, lease) };
      t.like(await runner.run({ name: 'echo', arguments: { message: isolation } }, { ...ctx, state }), {
        ok: true,
        content: `Echo: ${isolation}`,
      });
      await state.mcp.close();
      await mcp.close();
    }
  } finally {
    child.kill();
  }
});
