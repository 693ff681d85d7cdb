import { createRequire } from 'node:module';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { McpServer, mcpTools, mcpEnv } from 'agent-r1-ts/mcp';
import { ToolRunner, createRng } from 'agent-r1-ts';
const bin = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js');
for (const isolation of ['episode', 'spare', 'roots'] as const) {
  const server = new McpServer({
    command: process.execPath, args: (dir) => [bin, dir], isolation,
    confirmRoot: async (call, root) => (await call('list_allowed_directories', {})).split('\n').includes(root),
  });
  let t0 = performance.now();
  const { tools, server: info } = await mcpTools(server, { include: ['read_text_file', 'write_file', 'move_file', 'list_directory_with_sizes'] });
  console.log(isolation, 'listed', (performance.now() - t0).toFixed(0), info, tools.map((t) => t.name));
  const env = mcpEnv(server, {
    setup: (_task, dir) => { mkdirSync(join(dir, 'notes')); writeFileSync(join(dir, 'notes/a.txt'), 'alpha\n'); },
    prompt: () => [], step: () => ({ observation: '', reward: 0, done: false }), outcome: () => ({ reward: 0, success: true }),
  });
  const runner = new ToolRunner(tools, { timeoutMs: 5000, maxOutputChars: 2000 });
  const task = { id: 't', split: 'train', question: '' };
  for (let e = 0; e < 3; e++) {
    t0 = performance.now();
    const state = await env.init!(task, { rng: createRng(1), tools: 'live' });
    const t1 = performance.now();
    const ctx = { task, rng: createRng(1), state };
    const rs = [
      await runner.run({ name: 'list_directory_with_sizes', arguments: { path: '/workspace/notes' } }, ctx),
      await runner.run({ name: 'read_text_file', arguments: { path: '/workspace/notes/a.txt' } }, ctx),
      await runner.run({ name: 'write_file', arguments: { path: '/workspace/notes/b.txt', content: 'beta' } }, ctx),
      await runner.run({ name: 'move_file', arguments: { source: '/workspace/notes/a.txt', destination: '/workspace/a.txt' } }, ctx),
      await runner.run({ name: 'read_text_file', arguments: { path: '/etc/hostname' } }, ctx),
      await runner.run({ name: 'read_text_file', arguments: { pth: 3 } }, ctx),
    ];
    const t2 = performance.now();
    await env.dispose!(state);
    console.log(isolation, e, 'init', (t1 - t0).toFixed(1), 'calls', (t2 - t1).toFixed(1), 'dispose', (performance.now() - t2).toFixed(1));
    if (e === 0) { for (const r of rs) console.log(JSON.stringify(r)); console.log(JSON.stringify(state.mcp.files)); }
  }
  await server.close();
}
