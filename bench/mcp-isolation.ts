/**
 * MCP isolation benchmark (not a test): episodes per second of the `files` scenario's expert (about
 * 3.3 calls an episode on @modelcontextprotocol/server-filesystem) with each way of giving episodes
 * their server, on the main thread (8 episodes at a time); and a shared server (one for all
 * episodes) on a read-only variant, the mode for stateless servers.
 *
 *   npx tsx --conditions=source bench/mcp-isolation.ts [--json] [--episodes 200]
 *
 * Each row is measured after a warm-up rollout on the same server (warm servers and spares started).
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { rollout, type Scenario, type Task } from 'agent-r1-ts';
import { McpServer, mcpTools, type McpIsolation } from 'agent-r1-ts/mcp';
import { filesScenario } from '../scenarios/files/index.ts';
import { expert } from '../scenarios/files/policies.ts';
import { filesystemPackage } from '../scenarios/files/server.ts';

const flags = new Command()
  .option('--json', 'print the figures as one JSON object')
  .option('--episodes <n>', 'episodes per row', Number, 200)
  .parse()
  .opts<{ json?: boolean; episodes: number }>();

interface Row {
  mode: string;
  threads: string;
  episodesPerSecond: number;
  serversStarted: number;
}

const rows: Row[] = [];
const load = [loadavg()[0]!];

async function measure(mode: string, scenario: Scenario, server: McpServer, policyScenario = expert) {
  await rollout({ scenario, policy: policyScenario, split: 'train', episodes: 16, seed: 99 });
  const before = server.started;
  const start = performance.now();
  const { records } = await rollout({
    scenario,
    policy: policyScenario,
    split: 'train',
    episodes: flags.episodes,
    seed: 1,
  });
  const seconds = (performance.now() - start) / 1000;
  if (!records.every((r) => r.status === 'ok' && r.outcome.success)) throw new Error(`${mode}: an episode failed`);
  rows.push({
    mode,
    threads: 'main, 8 at a time',
    episodesPerSecond: flags.episodes / seconds,
    serversStarted: server.started - before,
  });
  load.push(loadavg()[0]!);
}

for (const isolation of ['episode', 'spare', 'roots'] as McpIsolation[]) {
  const { scenario, server } = await filesScenario(isolation);
  await measure(isolation, scenario, server);
  await server.close();
}

// shared: one server on one folder that no episode changes (the files tree of a task, read only).
const folder = (() => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'bench-mcp-')));
  mkdirSync(join(dir, 'inbox'));
  const inbox = ['memo-1.txt', 'mail-2.txt', 'todo-3.txt'].map((name) => {
    writeFileSync(join(dir, 'inbox', name), `About ${name}.\n`);
    return join(dir, 'inbox', name);
  });
  return { dir, inbox, remove: () => rmSync(dir, { recursive: true, force: true }) };
})();
const shared = new McpServer({
  command: process.execPath,
  args: [filesystemPackage().entry, folder.dir],
  label: 'server-filesystem',
  isolation: 'shared',
});
const { tools } = await mcpTools(shared, { include: ['list_directory_with_sizes', 'read_multiple_files'] });
const reading: Scenario = {
  ...(await filesScenario()).scenario,
  id: 'files-read',
  tools,
  env: {
    prompt: (task: Task) => [{ role: 'user', content: task.question }],
    step: ({ action }) => ({
      observation: action.kind === 'answer' ? null : 'ok',
      reward: 0,
      done: action.kind === 'answer',
    }),
    outcome: () => ({ reward: 1, success: true }),
  },
};
const reader = {
  id: 'reader',
  version: '1',
  act: async ({ turn }: { turn: number }) => ({
    text: [
      `<tool_call>{"name": "list_directory_with_sizes", "arguments": {"path": "${folder.dir}/inbox"}}</tool_call>`,
      `<tool_call>{"name": "read_multiple_files", "arguments": {"paths": ${JSON.stringify(folder.inbox)}}}</tool_call>`,
      '<answer>done</answer>',
    ][turn]!,
  }),
};
await measure('shared (read only)', reading, shared, reader as never);
await shared.close();
folder.remove();

const loadText = `load ${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)}`;
if (flags.json) console.log(JSON.stringify({ episodes: flags.episodes, load, rows }));
else {
  console.log(`| isolation | episodes/s | servers started for ${flags.episodes} episodes |`);
  console.log('|---|---|---|');
  for (const r of rows) console.log(`| ${r.mode} | ${r.episodesPerSecond.toFixed(1)} | ${r.serversStarted} |`);
  console.log(`\n${flags.episodes} episodes a row, ${rows[0]!.threads}; ${loadText}`);
}
