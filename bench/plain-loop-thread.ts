// A worker thread of the engine benchmark: plays its share of a run with the plain loop, on request.
import { parentPort } from 'node:worker_threads';
import { benchScenario, plainLoop } from './plain-loop.ts';

const scenarios = new Map<string, ReturnType<typeof benchScenario>>();

parentPort!.on('message', async (m: { source: string; episodes: number; seed: number; share: number; of: number }) => {
  let scenario = scenarios.get(m.source);
  if (!scenario) scenarios.set(m.source, (scenario = benchScenario(m.source)));
  const r = await plainLoop(scenario, m.episodes, m.seed, { share: m.share, of: m.of });
  parentPort!.postMessage(r.steps);
});
