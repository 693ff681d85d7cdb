/**
 * Replica benchmark (not a test): how much faster a model's rollouts run when a copy of the model
 * in a worker thread plays half of them (Replica), on the main job's kinds of rollout — a
 * GRPO step's sampled groups and a greedy evaluation — with the same checkpoint, in one run so the
 * ratio is fair on a shared machine. Checks the records are byte-identical.
 * Run: npx tsx --conditions=source bench/replica.ts [--policy DIR] [--repeat N] [--json]   (default DIR: runs/start/warm-start)
 */
import { existsSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { builtinScenarios } from '../scenarios/index.ts';
import { START_SCENARIO_OPTIONS } from '../src/app/start.ts';
import type { EpisodeRecord } from '../src/core/types.ts';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import { serializeRecord } from '../src/record/record.ts';
import type { RolloutExecutor } from '../src/rollout/executor.ts';
import { Replica } from '../src/rollout/replica.ts';
import { rollout } from '../src/rollout/rollout.ts';
import { GptTrainable } from '../src/rl/tfjs-trainable.ts';
import { loadScenario } from '../src/scenario/load.ts';

const flags = new Command()
  .option('--policy <dir>', 'a GPT checkpoint (default: the main job’s warm start)', 'runs/start/warm-start')
  .option('--repeat <n>', 'timed runs of each kind', (v) => Number(v), 1)
  .option('--json', 'print the figures as JSON')
  .parse()
  .opts<{ policy: string; repeat: number; json?: boolean }>();

if (!existsSync(join(flags.policy, 'model.json'))) {
  process.stderr.write(`no checkpoint at ${flags.policy}: run \`npm start\` first, or pass --policy DIR\n`);
  process.exit(2);
}
const backend = await initBackend();
const scenario = await loadScenario('multihop-qa', builtinScenarios, { seed: '1', ...START_SCENARIO_OPTIONS });
const model = await GptTrainable.fromCheckpoint(flags.policy);
const episode = { maxTokensPerTurn: 64 };
const tasks = await scenario.tasks({ split: 'train', seed: 1, count: 8 });
const kinds = [
  {
    kind: 'GRPO step: 8 tasks × 8 samples, T = 1',
    options: { scenario, split: 'train', episodes: 64, group: 8, tasks, seed: 11, concurrency: 64, config: episode },
    temperature: 1,
  },
  {
    kind: 'evaluation: 150 test tasks, greedy',
    options: { scenario, split: 'test', episodes: 150, seed: 12, concurrency: 64, config: episode },
    temperature: 0,
  },
];
const replica = new Replica({ backend: backend.name, scenarioSource: 'multihop-qa' });
const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
const play = (k: (typeof kinds)[number], executor?: RolloutExecutor, episodes = k.options.episodes) =>
  rollout({ ...k.options, episodes, policy: model.policy({ temperature: k.temperature }), executor });
const timed = async (k: (typeof kinds)[number], executor?: RolloutExecutor) => {
  const t0 = performance.now();
  const { records } = await play(k, executor);
  return { seconds: (performance.now() - t0) / 1000, records };
};
// Warm both paths once (worker start-up, the scenario's index, tfjs kernels) before timing.
await play(kinds[1]!, replica, 4);
await play(kinds[1]!, undefined, 4);
const rows = [];
for (const k of kinds) {
  let one = 0;
  let two = 0;
  let identical = true;
  for (let i = 0; i < flags.repeat; i++) {
    const a = await timed(k);
    const b = await timed(k, replica);
    one += a.seconds / flags.repeat;
    two += b.seconds / flags.repeat;
    identical &&= bytes(a.records) === bytes(b.records);
  }
  rows.push({ kind: k.kind, oneThreadS: one, withReplicaS: two, speedup: one / two, identical });
}
await replica.close();
const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.versions.node}, ${backend.name}`;
if (flags.json) {
  process.stdout.write(JSON.stringify({ machine, checkpoint: flags.policy, repeat: flags.repeat, rows }) + '\n');
} else {
  const lines = [
    `machine: ${machine}; checkpoint ${flags.policy}; mean of ${flags.repeat} run(s)`,
    '',
    '| rollout | main thread only | with the replica | speed-up | records identical |',
    '|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.kind} | ${r.oneThreadS.toFixed(1)} s | ${r.withReplicaS.toFixed(1)} s | ×${r.speedup.toFixed(2)} | ${r.identical ? 'yes' : 'NO'} |`,
    ),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}
