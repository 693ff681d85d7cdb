/**
 * Environment-server benchmark (not a test): `agent-r1 env serve` in its own process, N concurrent
 * WebSocket sessions on loopback each playing S steps (2-step episodes: a structured tool call, then
 * a raw-text answer), for the calculator and multihop-qa. Reports steps/s, the p50/p99 latency of a
 * step as the client sees it, the server's memory, and then replays every record the server wrote:
 * none may be lost or corrupt, all must verify. The clients run in this process, on the same cores.
 * Closed loop by default (each client sends its next step as soon as it has the answer): the latency
 * then includes the wait behind the other sessions' steps (sessions / throughput); --think-ms
 * paces the clients like trainers that generate between steps.
 * The server runs the built package (dist/), as an installed one does.
 * Run: npm run build && npx tsx --conditions=source bench/env-server.ts [--json] [--sessions 64] [--steps 50]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { builtinScenarios } from '../scenarios/index.ts';
import { connectEnv } from '../src/env-server/client.ts';
import type { EnvAction } from '../src/env-server/protocol.ts';
import { loadRecords } from '../src/record/jsonl.ts';
import { replayRecord } from '../src/replay/replay.ts';
import { loadScenario } from '../src/scenario/load.ts';

const flags = new Command()
  .option('--json', 'print the figures as JSON')
  .option('--sessions <n>', 'concurrent sessions', (v) => Number(v), 64)
  .option('--steps <n>', 'steps per session', (v) => Number(v), 50)
  .option('--scenarios <list>', 'comma-separated scenarios', 'calculator,multihop-qa')
  .option('--think-ms <ms>', "each client's pause before a step, as a trainer generating (0: closed loop)", Number, 0)
  .parse()
  .opts<{ json?: boolean; sessions: number; steps: number; scenarios: string; thinkMs: number }>();

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/** The first action of an episode: a call of the scenario's tool. */
const firstAction: Record<string, (question: string) => EnvAction> = {
  calculator: () => ({ tool_calls: [{ name: 'calculate', arguments: { expression: '(3 + 4) * 2' } }] }),
  'multihop-qa': (question) => ({ tool_calls: [{ name: 'search', arguments: { query: question } }] }),
};

function memoryMiB(pid: number): { rss: number; peak: number } | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
  } catch {
    return null; // not Linux
  }
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

async function run(scenarioId: string) {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-bench-env-'));
  const args = [join(repoRoot, 'bin/agent-r1.js')];
  const server = spawn(
    process.execPath,
    [
      ...args,
      'env',
      'serve',
      '--scenario',
      scenarioId,
      '--port',
      '0',
      '--max-sessions',
      String(flags.sessions),
      '--record',
      dir,
      '--quiet',
      '--json',
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<number | null>((resolve) => server.on('exit', resolve));
  const { url } = JSON.parse(
    await new Promise<string>((resolve, reject) => {
      createInterface({ input: server.stdout! }).once('line', resolve);
      server.once('exit', (code) => reject(new Error(`env serve exited with ${code}`)));
    }),
  ) as { url: string };

  const clients = await Promise.all(Array.from({ length: flags.sessions }, () => connectEnv(url)));
  const latencies: number[] = [];
  let episodes = 0;
  const started = performance.now();
  await Promise.all(
    clients.map(async (env, session) => {
      let steps = 0;
      for (let episode = 0; steps < flags.steps; episode++) {
        const reset = await env.reset({ seed: session, task: episode, policy: 'bench' });
        episodes++;
        let result = reset;
        for (let turn = 0; !result.done && steps < flags.steps; turn++) {
          const action: EnvAction =
            turn === 0
              ? firstAction[scenarioId]!(reset.observation.text ?? '')
              : { text: `<answer>${(result.observation.text ?? '').slice(0, 40).replace(/[<>]/g, '')}</answer>` };
          if (flags.thinkMs > 0) await new Promise((r) => setTimeout(r, flags.thinkMs));
          const t0 = performance.now();
          result = await env.step(action);
          latencies.push(performance.now() - t0);
          steps++;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const memory = memoryMiB(server.pid!);
  await Promise.all(clients.map((c) => c.close()));
  server.kill('SIGTERM');
  if ((await exited) !== 0) throw new Error('env serve did not stop cleanly');

  // Every episode the clients started is on disk, intact, and replays.
  const { records, corrupt } = await loadRecords(join(dir, 'episodes.jsonl'));
  const scenario = await loadScenario(scenarioId, builtinScenarios, {});
  let verified = 0;
  for (const record of records) if ((await replayRecord(record, scenario)).verified) verified++;
  latencies.sort((a, b) => a - b);
  return {
    scenario: scenarioId,
    sessions: flags.sessions,
    thinkMs: flags.thinkMs,
    steps: latencies.length,
    episodes,
    stepsPerSecond: latencies.length / seconds,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    serverRssMiB: memory?.rss ?? null,
    serverPeakMiB: memory?.peak ?? null,
    records: records.length,
    lost: episodes - records.length,
    corrupt: corrupt.length,
    verified,
  };
}

const results = [];
for (const id of flags.scenarios.split(',')) results.push(await run(id));

if (flags.json) process.stdout.write(JSON.stringify({ results }) + '\n');
else {
  const f = (x: number | null, d = 1) => (x === null ? '–' : x.toFixed(d));
  const head = [
    'scenario',
    'sessions',
    'steps',
    'steps/s',
    'p50 ms',
    'p99 ms',
    'server RSS MiB (peak)',
    'records',
    'lost',
    'corrupt',
    'verified',
  ];
  const rows = results.map((r) => [
    r.scenario,
    String(r.sessions),
    String(r.steps),
    f(r.stepsPerSecond, 0),
    f(r.p50Ms, 2),
    f(r.p99Ms, 2),
    `${f(r.serverRssMiB, 0)} (${f(r.serverPeakMiB, 0)})`,
    String(r.records),
    String(r.lost),
    String(r.corrupt),
    String(r.verified),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [head, ...rows]) process.stdout.write(row.map((c, i) => c.padStart(widths[i]!)).join('  ') + '\n');
}
