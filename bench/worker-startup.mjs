// Worker thread start-up: how long a rollout pool's first task takes (thread start, worker modules,
// the calculator scenario built) when the workers run the compiled package (dist/workers/entry.js,
// no loader) and when they run the sources (workers/bootstrap.mjs registers tsx in each thread).
//   node bench/worker-startup.mjs [--runs 5] [--threads 1] [--json]      (npm run build first)
import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};

if (process.argv[2] === '--child') {
  const { createRolloutPool } = await import(pathToFileURL(process.argv[3]).href);
  const threads = Number(process.argv[4]);
  const t0 = performance.now();
  const pool = createRolloutPool(threads);
  const run = () => {
    const { port1, port2 } = new MessageChannel();
    port1.on('message', () => {});
    const task = {
      scenario: { source: 'calculator', options: {} },
      policy: { kind: 'scripted', name: 'expert' },
      items: [],
      port: port2,
      runId: 'startup',
      config: {},
      concurrency: 1,
    };
    return pool.run(task, { transferList: [port2] }).finally(() => port1.close());
  };
  await Promise.all(Array.from({ length: threads }, run));
  console.log(performance.now() - t0);
  await pool.destroy();
} else {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const runs = Number(arg('--runs', '5'));
  const threads = arg('--threads', '1');
  const modes = {
    'dist (compiled, no loader)': [[], 'dist/src/rollout/parallel-rollout.js'],
    'sources (tsx in each thread)': [['--import=tsx', '--conditions=source'], 'src/rollout/parallel-rollout.ts'],
  };
  const result = {};
  for (let r = 0; r < runs; r++) {
    for (const [mode, [flags, file]] of Object.entries(modes)) {
      const out = spawnSync(process.execPath, [...flags, fileURLToPath(import.meta.url), '--child', file, threads], {
        cwd: root,
        encoding: 'utf8',
      });
      if (out.status !== 0) throw new Error(`${mode}: ${out.stderr}`);
      (result[mode] ??= []).push(Math.round(Number(out.stdout.trim())));
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  if (process.argv.includes('--json')) console.log(JSON.stringify({ threads: Number(threads), runs: result }));
  else {
    console.log(`first task of a ${threads}-thread rollout pool, ms (${runs} runs)`);
    for (const [mode, xs] of Object.entries(result)) console.log(`${mode.padEnd(30)} median ${median(xs)}  [${xs}]`);
  }
}
