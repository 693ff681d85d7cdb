import type { MessagePort } from 'node:worker_threads';
import type { EpisodeRecord } from '../src/core/types.ts';
import { AgentR1Error } from '../src/core/errors.ts';
import type { Policy } from '../src/policy/policy.ts';
import { createToolCache } from '../src/tools/runner.ts';
import { runEpisode } from '../src/rollout/run-episode.ts';
import { RemotePolicy } from '../src/rollout/remote-policy.ts';
import { toTrajectory } from '../src/rollout/trajectory.ts';
import type { RolloutTask, RolloutTaskResult, ServerMessage, WorkerPolicySpec } from '../src/rollout/protocol.ts';
import type { Scenario } from '../src/scenario/scenario.ts';
import { scenarioFor } from './scenario-cache.ts';

const toolCache = createToolCache();

async function policyFor(spec: WorkerPolicySpec, scenario: Scenario, port: MessagePort, seed: number): Promise<{ policy: Policy; remote?: RemotePolicy }> {
  if (spec.kind === 'scripted') {
    const factory = scenario.policies[spec.name];
    if (!factory) throw new AgentR1Error(`scenario ${scenario.id} has no policy "${spec.name}"`);
    return { policy: await factory({ scenario, seed }) };
  }
  const { Tokenizer } = await import('../src/policy/tfjs/tokenizer.ts');
  const { chatEncoding } = await import('../src/policy/tfjs/chat-template.ts');
  const encode = chatEncoding(new Tokenizer(spec.tokenizer as never));
  const remote = new RemotePolicy(port, spec.id, spec.version, encode);
  return { policy: remote, remote };
}

/**
 * A Piscina task: run a set of episodes, several at once, each an actor of the episode machine.
 * Finished episodes go back over the task's port as soon as they finish (so a crash loses only the
 * unfinished ones); model policies are served by the main thread over the same port.
 */
export default async function runRolloutTask(task: RolloutTask): Promise<RolloutTaskResult> {
  const scenario = await scenarioFor(task.scenario);
  const { policy, remote } = await policyFor(task.policy, scenario, task.port, task.items[0]?.seed ?? 0);
  if (remote) task.port.on('message', (m: ServerMessage) => remote.receive(m));
  const metrics = { toolMs: 0 };
  let next = 0;
  const send = (record: EpisodeRecord) => {
    const trajectory = toTrajectory(record);
    const transfer = trajectory ? [trajectory.tokens.buffer, trajectory.mask.buffer, trajectory.logprobs.buffer, trajectory.rewards.buffer] : [];
    task.port.postMessage({ type: 'record', record, trajectory }, transfer as ArrayBuffer[]);
  };
  const lane = async () => {
    while (next < task.items.length) {
      const item = task.items[next++]!;
      const record = await runEpisode({
        scenario,
        task: item.task,
        policy,
        seed: item.seed,
        index: item.index,
        sample: item.sample,
        group: item.task.id,
        runId: task.runId,
        config: task.config,
        toolCache,
        metrics,
      });
      send(record);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(task.concurrency, task.items.length)) }, lane));
  } finally {
    task.port.close();
  }
  return { episodes: task.items.length, toolMs: metrics.toolMs };
}
