import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { calculator } from '../../scenarios/calculator/index.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { rollout, type RolloutOptions } from '../../src/rollout/rollout.ts';
import { workerThreads, type WorkerThreadsOptions } from '../../src/rollout/worker-threads.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';

/** Shared by the worker-thread tests (fast and slow). */
export const FAULTY = fileURLToPath(new URL('../fixtures/faulty', import.meta.url));
export const calc = calculator as unknown as Scenario;
export const bytes = (records: EpisodeRecord[]) => records.map(serializeRecord).join('\n');
export const call = (name: string, args: object = {}) =>
  `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

/** A rollout on its own worker pool, closed afterwards. */
export async function inWorkers(options: RolloutOptions, executorOptions: WorkerThreadsOptions) {
  const executor = workerThreads(executorOptions);
  try {
    return await rollout({ ...options, executor });
  } finally {
    await executor.close();
  }
}

/** The fault-injection scenario (test/fixtures/faulty) playing `scripts`, with fresh crash markers. */
export async function faulty(scripts: string[][], options: { [key: string]: string } = {}) {
  const markers = mkdtempSync(join(tmpdir(), 'agent-r1-markers-'));
  return loadScenario(FAULTY, builtinScenarios, { markers, scripts: JSON.stringify(scripts), ...options });
}
