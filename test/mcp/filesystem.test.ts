import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { createRng, ToolRunner, type Task } from 'agent-r1-ts';
import { listMcpCatalog, mcpEnv, mcpTools, McpServer, type McpState } from 'agent-r1-ts/mcp';
import type { ToolEnv } from '../../src/env/tool-env.ts';
import { CATALOG, filesystemPackage } from '../../scenarios/files/server.ts';

const FILESYSTEM_SERVER = filesystemPackage().entry;

// Every test here talks to the real @modelcontextprotocol/server-filesystem, one process per episode.

const task: Task = { id: 't', split: 'train', question: '' };

function server(extra: Partial<ConstructorParameters<typeof McpServer>[0]> = {}) {
  return new McpServer({
    command: process.execPath,
    args: (dir) => [FILESYSTEM_SERVER, dir],
    label: 'server-filesystem',
    isolation: 'episode',
    ...extra,
  });
}

function envOn(mcp: McpServer, setup?: (dir: string) => void): ToolEnv<Task, McpState> {
  return mcpEnv(mcp, {
    setup: (_task, dir) => {
      mkdirSync(join(dir, 'notes'));
      writeFileSync(join(dir, 'notes/a.txt'), 'alpha\n');
      setup?.(dir);
    },
    prompt: () => [],
    step: () => ({ observation: '', reward: 0, done: false }),
    outcome: () => ({ reward: 0, success: true }),
  });
}

/** An episode's tools, live: its state, and a runner with the given timeout. */
async function episode(mcp: McpServer, timeoutMs = 5000, setup?: (dir: string) => void) {
  const { tools } = await mcpTools(mcp);
  const env = envOn(mcp, setup);
  const state = await env.init!(task, { rng: createRng(0), tools: 'live' });
  const runner = new ToolRunner(tools, { timeoutMs, maxOutputChars: 4000 });
  const run = (name: string, args: { [key: string]: unknown }, signal?: AbortSignal) =>
    runner.run({ name, arguments: args as never }, { task, rng: createRng(0), state, signal });
  return { state, run, dispose: () => env.dispose!(state), tools };
}

test('lists every tool; the files scenario catalog is what the installed server lists', async (t) => {
  const listed = await listMcpCatalog(server());
  t.deepEqual(listed.server, { name: 'secure-filesystem-server', version: '0.2.0' });
  t.true(listed.tools.some((tool) => tool.name === 'move_file'));
  t.deepEqual(
    listed,
    CATALOG,
    'scenarios/files/catalog.json is stale: npx tsx --conditions=source scenarios/files/update-catalog.ts',
  );
});

test('a call: the text for the agent, structured content as data, the scratch folder named /workspace', async (t) => {
  const mcp = server();
  const e = await episode(mcp);
  try {
    const read = await e.run('read_text_file', { path: '/workspace/notes/a.txt' });
    t.deepEqual(read, {
      name: 'read_text_file',
      ok: true,
      content: 'alpha\n',
      data: { structuredContent: { content: 'alpha\n' } },
    });
    const write = await e.run('write_file', { path: '/workspace/notes/b.txt', content: 'beta' });
    t.is(write.content, 'Successfully wrote to /workspace/notes/b.txt');
    t.deepEqual((write.data as { effects: unknown }).effects, [
      { op: 'files', changes: { 'notes/b.txt': 'beta' }, seq: 0 },
    ]);
    t.deepEqual(e.state.mcp.files, { 'notes/': '', 'notes/a.txt': 'alpha\n', 'notes/b.txt': 'beta' });
    t.is(readFileSync(join(e.state.mcp.scratch!, 'notes/b.txt'), 'utf8'), 'beta', 'the server wrote the real file');
  } finally {
    await e.dispose();
  }
  t.is(mcp.openConnections, 0, 'dispose ended the episode server');
});

test('an isError result is an error observation, not an exception; no real path reaches it', async (t) => {
  const e = await episode(server());
  try {
    const denied = await e.run('read_text_file', { path: '/etc/hostname' });
    t.false(denied.ok);
    t.is(denied.error?.kind, 'tool_error');
    t.is(
      denied.content,
      'read_text_file failed: Access denied - path outside allowed directories: /etc/hostname not in /workspace',
    );
    const missing = await e.run('read_text_file', { path: '/workspace/none.txt' });
    t.regex(missing.content, /ENOENT: no such file or directory, open '\/workspace\/none\.txt'/);
    t.false(missing.content.includes(e.state.mcp.scratch!));
  } finally {
    await e.dispose();
  }
});

test("arguments that do not fit the server's JSON Schema are refused before the call, saying what is wrong", async (t) => {
  const e = await episode(server());
  try {
    const tool = e.tools.find((x) => x.name === 'move_file')!;
    const schema = (await import('../../src/tools/tool.ts')).toOpenAITool(tool).function.parameters;
    const { $schema: _draft, ...published } = CATALOG.tools.find((x) => x.name === 'move_file')!.inputSchema;
    t.deepEqual(schema, published, "the server's own schema (less $schema, which the wire shape leaves out)");
    const missing = await e.run('move_file', { source: '/workspace/notes/a.txt' });
    t.is(missing.error?.kind, 'bad_arguments');
    t.regex(missing.content, /missing required argument "destination"/);
    const wrongType = await e.run('read_text_file', { path: 3 });
    t.is(wrongType.error?.kind, 'bad_arguments');
    t.regex(wrongType.content, /must be string\n {2}→ at path/);
    t.deepEqual(e.state.mcp.files['notes/a.txt'], 'alpha\n', 'nothing moved');
  } finally {
    await e.dispose();
  }
});

test('a call that hangs times out with the runner, and the server still answers the next call', async (t) => {
  // Reading a FIFO nobody writes to blocks the server's read for ever.
  const e = await episode(server(), 400, (dir) => execFileSync('mkfifo', [join(dir, 'pipe')]));
  try {
    const start = performance.now();
    const hung = await e.run('read_text_file', { path: '/workspace/pipe' });
    t.is(hung.error?.kind, 'timeout');
    t.is(hung.content, 'read_text_file timed out after 400 ms');
    t.true(performance.now() - start < 10_000);
    t.is((await e.run('read_text_file', { path: '/workspace/notes/a.txt' })).content, 'alpha\n');
  } finally {
    await e.dispose();
  }
});

test('a killed server: its calls become error observations naming why; dispose still cleans up', async (t) => {
  const mcp = server();
  const e = await episode(mcp);
  try {
    t.true(e.state.mcp.connection!.kill('SIGKILL'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await e.run('read_text_file', { path: '/workspace/notes/a.txt' });
    t.false(after.ok);
    t.is(after.error?.kind, 'tool_error');
    t.is(after.content, 'read_text_file failed: the MCP server server-filesystem is gone (it exited: signal SIGKILL)');
  } finally {
    await e.dispose();
  }
  t.is(mcp.openConnections, 0);
});

test('a server that cannot start: the episode fails with its stderr, and no process is left', async (t) => {
  const mcp = new McpServer({
    command: process.execPath,
    args: (dir) => [FILESYSTEM_SERVER, join(dir, 'no-such-folder')],
  });
  t.is(mcp.label, 'node', 'without a label: the command');
  const env = envOn(mcp);
  const err = await t.throwsAsync(env.init!(task, { rng: createRng(0), tools: 'live' }) as Promise<unknown>);
  t.regex(
    err!.message,
    /^MCP server node did not start: it exited \(code 1\)\n {2}its stderr ends: .*None of the specified directories are accessible/s,
  );
  t.is(mcp.openConnections, 0);
});
