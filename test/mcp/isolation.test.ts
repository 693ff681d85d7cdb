import { mkdtempSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFolder } from '../../src/mcp/scratch.ts';
import test from 'ava';
import { createRng, ToolRunner, type Task } from 'agent-r1-ts';
import { mcpEnv, mcpTools, McpServer } from 'agent-r1-ts/mcp';

// server-memory keeps its knowledge graph in one file: spare servers each get their own
// (MEMORY_FILE_PATH in their folder), started ahead of the episodes that take them.

const MEMORY = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-memory/dist/index.js');
const task: Task = { id: 't', split: 'train', question: '' };

function memoryServer(extra: { maxServers?: number; spares?: number } = {}) {
  return new McpServer({
    command: process.execPath,
    args: [MEMORY],
    env: (dir) => ({ MEMORY_FILE_PATH: `${dir}/memory.jsonl` }),
    label: 'server-memory',
    isolation: 'spare',
    ...extra,
  });
}

const plainEnv = {
  prompt: () => [],
  step: () => ({ observation: '', reward: 0, done: false }),
  outcome: () => ({ reward: 0, success: true }),
};

test('spare servers: each episode its own data file; what one stores, the next does not see; the folder is tracked', async (t) => {
  const mcp = memoryServer({ spares: 1 });
  const { tools, server } = await mcpTools(mcp, { include: ['create_entities', 'read_graph'] });
  t.is(server.name, 'memory-server');
  const env = mcpEnv(mcp, plainEnv);
  const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 4000 });
  const graphs: string[] = [];
  for (const who of ['Ada', 'Grace']) {
    const state = await env.init!(task, { rng: createRng(0), tools: 'live' });
    const ctx = { task, rng: createRng(0), state };
    try {
      const made = await runner.run(
        {
          name: 'create_entities',
          arguments: { entities: [{ name: who, entityType: 'person', observations: ['codes'] }] },
        },
        ctx,
      );
      t.true(made.ok, made.content);
      graphs.push((await runner.run({ name: 'read_graph', arguments: {} }, ctx)).content);
      t.deepEqual(Object.keys(state.mcp.files), ['memory.jsonl']);
      t.regex(state.mcp.files['memory.jsonl']!, new RegExp(`"name":"${who}"`));
    } finally {
      await env.dispose!(state);
    }
  }
  t.regex(graphs[0]!, /Ada/);
  t.notRegex(graphs[1]!, /Ada/, "the second episode's server has a file of its own");
  await mcp.close();
  t.is(mcp.openConnections, 0);
});

test('an init that throws after the server started gives it back; maxServers makes the next episode wait', async (t) => {
  const mcp = memoryServer({ maxServers: 1, spares: 0 });
  const failing = mcpEnv(mcp, {
    ...plainEnv,
    init: () => {
      throw new Error('bad init');
    },
  });
  await t.throwsAsync(failing.init!(task, { rng: createRng(0), tools: 'live' }) as Promise<unknown>, {
    message: 'bad init',
  });
  t.is(mcp.openConnections, 0, 'its server ended');
  const env = mcpEnv(mcp, plainEnv);
  const first = await env.init!(task, { rng: createRng(0), tools: 'live' });
  let secondStarted = false;
  const second = (env.init!(task, { rng: createRng(0), tools: 'live' }) as Promise<typeof first>).then((s) => {
    secondStarted = true;
    return s;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.false(secondStarted, 'one server at a time');
  await env.dispose!(first);
  await env.dispose!(await second);
  t.true(secondStarted);
  t.is(mcp.openConnections, 0);
});

test('replayed episodes start no server; a tool called there says why it cannot run', async (t) => {
  const mcp = memoryServer();
  const { tools } = await mcpTools(mcp, { include: ['read_graph'] });
  const startedToList = mcp.started;
  const env = mcpEnv(mcp, plainEnv);
  const state = await env.init!(task, { rng: createRng(0), tools: 'recorded' });
  const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 4000 });
  const r = await runner.run({ name: 'read_graph', arguments: {} }, { task, rng: createRng(0), state });
  t.regex(r.content, /the episode has no server-memory server \(its tools are being replayed\)/);
  await env.dispose!(state);
  t.is(mcp.started, startedToList, 'only the listing started one');
});

test('tools of a per-episode server used without mcpEnv say so', async (t) => {
  const mcp = memoryServer();
  const { tools } = await mcpTools(mcp, { include: ['read_graph'] });
  const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 4000 });
  const r = await runner.run({ name: 'read_graph', arguments: {} }, { task, rng: createRng(0), state: undefined });
  t.regex(r.content, /isolation "spare"\): make the scenario's env with mcpEnv\(server, env\)/);
  t.throws(() => new McpServer({ command: 'x', args: (d) => [d], isolation: 'shared' }), {
    message: /need isolation "episode", "spare" or "roots"/,
  });
  t.throws(() => new McpServer({ url: 'http://127.0.0.1:1/mcp', isolation: 'roots' }), {
    message: /a server at a URL/,
  });
});

test("a call given up on stops its episode's server: no late write reaches the folder, the next call says why", async (t) => {
  const SLOW = new URL('../fixtures/mcp/slow-writer.mjs', import.meta.url).pathname;
  const mcp = new McpServer({
    command: process.execPath,
    args: (dir) => [SLOW, dir],
    label: 'slow',
    isolation: 'episode',
  });
  const { tools } = await mcpTools(mcp);
  const env = mcpEnv(mcp, plainEnv);
  const runner = new ToolRunner(tools, { timeoutMs: 300, maxOutputChars: 4000 });
  const state = await env.init!(task, { rng: createRng(0), tools: 'live' });
  const ctx = { task, rng: createRng(0), state };
  try {
    t.like(await runner.run({ name: 'write', arguments: { name: 'a' } }, ctx), { ok: true });
    const slow = await runner.run({ name: 'write', arguments: { name: 'late', ms: 1500 } }, ctx);
    t.false(slow.ok);
    t.is(slow.error?.kind, 'timeout');
    const next = await runner.run({ name: 'list', arguments: {} }, ctx);
    t.false(next.ok);
    t.regex(next.content, /it was stopped after a call was given up \(write\)/);
    await new Promise((resolve) => setTimeout(resolve, 1700));
    t.deepEqual(Object.keys(state.mcp.files), ['a'], 'the folder as the calls left it');
    t.deepEqual(readdirSync(state.mcp.scratch!), ['a'], 'the late write never happened');
  } finally {
    await env.dispose!(state);
    await mcp.close();
  }
});

test("a file listed and gone before it is read (a temporary one, renamed away) is not in the folder's contents", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-vanish-'));
  writeFileSync(join(dir, 'kept'), 'k');
  // Files come and go while the folder is read, as a server's saves do.
  let stop = false;
  const churn = (async () => {
    for (let i = 0; !stop; i++) {
      const tmp = join(dir, `kept.${i}.tmp`);
      writeFileSync(tmp, 'x');
      renameSync(tmp, join(dir, 'kept'));
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  try {
    for (let i = 0; i < 200; i++) {
      const contents = await readFolder(dir);
      t.true(Object.keys(contents).every((k) => k === 'kept'));
    }
  } finally {
    stop = true;
    await churn;
  }
});
