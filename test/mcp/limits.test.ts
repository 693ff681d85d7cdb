import { fileURLToPath } from 'node:url';
import test from 'ava';
import { createRng, ToolRunner, type Task } from 'agent-r1-ts';
import { McpServer, mcpTools } from 'agent-r1-ts/mcp';

// A server that answers with more than one message may hold (MAX_MESSAGE_BYTES, 10 MiB) fails that
// call, and goes on; one that sends an oversized message answering no call is stopped, and its calls
// fail as gone. Neither ends this process (the SDK's reader threw where nothing caught it).

const BIG = fileURLToPath(new URL('../fixtures/mcp/big-server.mjs', import.meta.url));
const task: Task = { id: 't', split: 'train', question: '' };
const ctx = { task, rng: createRng(0), state: undefined };

test('an answer over 10 MiB fails its call with the size and the limit; the server answers the next', async (t) => {
  const server = new McpServer({ command: process.execPath, args: [BIG], label: 'big', isolation: 'shared' });
  try {
    const { tools } = await mcpTools(server);
    const runner = new ToolRunner(tools, { timeoutMs: 30_000, maxOutputChars: 1000 });
    const big = await runner.run({ name: 'big', arguments: { mb: 12 } }, ctx);
    t.false(big.ok);
    t.regex(big.content, /the server's answer was \d{8} bytes, over the 10485760-byte limit on one message/);
    const small = await runner.run({ name: 'big', arguments: { mb: 1 } }, ctx);
    t.true(small.ok, small.content);
    t.like(await runner.run({ name: 'echo', arguments: { text: 'still here' } }, ctx), {
      ok: true,
      content: 'still here',
    });
  } finally {
    await server.close();
  }
});

test('a message over 10 MiB that answers no call stops the server: its calls fail as gone, with why', async (t) => {
  const server = new McpServer({ command: process.execPath, args: [BIG], label: 'big', isolation: 'shared' });
  try {
    const { tools } = await mcpTools(server);
    const runner = new ToolRunner(tools, { timeoutMs: 30_000, maxOutputChars: 1000 });
    const flood = await runner.run({ name: 'flood', arguments: { mb: 11 } }, ctx);
    t.false(flood.ok);
    const after = await runner.run({ name: 'echo', arguments: { text: 'x' } }, ctx);
    t.false(after.ok);
    t.regex(after.content, /it sent a message of \d{8} bytes, over the 10485760-byte limit/);
  } finally {
    await server.close();
  }
});
