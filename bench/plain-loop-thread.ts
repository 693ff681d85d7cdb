// A worker thread of the engine benchmark: the plain loop on its share of a run. It plans on
// `prepare` and plays on `play`, so that the threads' play is timed together, and the plan (which
// each thread would otherwise make in full for itself) is not part of what is meant to scale.
import { parentPort } from 'node:worker_threads';
import type { EpisodePlanItem, Policy, Scenario } from 'agent-r1-ts';
import { benchScenario, planPlain, plainShare, playPlain } from './plain-loop.ts';

export type PlainThreadMessage =
  | { type: 'prepare'; source: string; root: string; episodes: number; seed: number; share: number; of: number }
  | { type: 'play' };

const scenarios = new Map<string, Scenario>();
let prepared: { scenario: Scenario; policy: Policy; items: EpisodePlanItem[] } | undefined;

parentPort!.on('message', async (m: PlainThreadMessage) => {
  if (m.type === 'prepare') {
    let scenario = scenarios.get(m.source);
    if (!scenario) scenarios.set(m.source, (scenario = await benchScenario(m.source, m.root)));
    const policy = await scenario.policies.expert!({ scenario, seed: 0 });
    const plan = await planPlain(scenario, policy, m.episodes, m.seed);
    prepared = { scenario, policy, items: plainShare(plan, m.share, m.of) };
    parentPort!.postMessage('ready');
  } else {
    const { scenario, policy, items } = prepared!;
    parentPort!.postMessage(await playPlain(scenario, policy, items));
  }
});
