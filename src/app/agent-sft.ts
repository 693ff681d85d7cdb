import { deriveSeed } from '../core/rng.ts';
import type { EpisodeRecord, Task } from '../core/types.ts';
import type { AgentModule } from '../gateway/agent-module.ts';
import { AGENT_MODEL_NAME, AgentSession } from '../gateway/agent-session.ts';
import { policyAnswerer } from '../gateway/gateway.ts';
import { summarizeAgentRecords } from '../gateway/play-agent.ts';
import type { HfPolicy } from '../policy/hf/hf-policy.ts';
import type { RolloutSummary } from '../rollout/summary.ts';
import { appendJsonl } from '../rl/run-dir.ts';
import { TrainingError } from '../rl/errors.ts';
import { hfSft, imitated, recordSequences, type HfSftOptions, type HfSftResult } from './records-sft.ts';
import { join } from 'node:path';

/** The split an agent's model is scored on after training: `test` where the tasks have it, else `dev`. */
export function heldOutSplit(tasks: readonly Task[]): string | undefined {
  return ['test', 'dev'].find((s) => tasks.some((t) => t.split === s));
}

export interface AgentSftOptions extends Omit<HfSftOptions, 'meta'> {
  agent: AgentModule;
  tasks: readonly Task[];
  /** Demonstrations played (the train tasks, cycled). */
  episodes: number;
  /** Held-out episodes the trained model plays at the end, greedily (0: none). */
  evalEpisodes: number;
  maxTurns: number;
  maxTokensPerTurn: number;
  onPhase?: (phase: 'demonstrate' | 'train' | 'eval', detail: { [key: string]: unknown }) => void;
}

export interface AgentSftResult extends Omit<HfSftResult, 'trainable'> {
  demonstrations: number;
  demoSuccess: number;
  eval?: RolloutSummary & { split: string };
}

/**
 * `sft --agent FILE --init hf:DIR`: the agent module's demonstrator plays the agent's train tasks
 * through the gateway (the agent's own code makes every request), the successful episodes are
 * rendered with the model's own template and trained on (loss on the answers), and the model then
 * plays held-out tasks through the same gateway. The demonstrations are kept in OUT/demonstrations.jsonl.
 */
export async function runAgentSft(options: AgentSftOptions): Promise<AgentSftResult> {
  const { agent, seed } = options;
  if (!agent.demonstrator)
    throw new TrainingError(
      `${agent.file} exports no demonstrator: record a teacher instead (serve --policy openai:URL --record DIR) and use sft --records`,
    );
  const session = await AgentSession.open({
    agent,
    tasks: options.tasks,
    seed,
    maxTurns: options.maxTurns,
    maxTokensPerTurn: options.maxTokensPerTurn,
  });
  try {
    const train = session.tasksOf('train');
    if (train.length === 0) throw new TrainingError('the agent has no tasks in the train split to demonstrate');
    options.onPhase?.('demonstrate', { episodes: options.episodes, tasks: train.length });
    const tasks = Array.from({ length: options.episodes }, (_, i) => train[i % train.length]!);
    const demos = await session.demonstrations(tasks, deriveSeed(seed, 'demos'));
    const used = imitated(demos);
    options.onPhase?.('train', { demonstrations: demos.length, successful: used.length });
    const { trainable, ...trained } = await hfSft(
      { ...options, meta: { agent: agent.file, agentVersion: agent.version, demonstrations: demos.length } },
      (model) => recordSequences(model, used),
    );
    await appendJsonl(join(options.out, 'demonstrations.jsonl'), demos);
    const result: AgentSftResult = {
      ...trained,
      demonstrations: demos.length,
      demoSuccess: summarizeAgentRecords(demos).successRate,
    };
    const split = heldOutSplit(options.tasks);
    if (options.evalEpisodes > 0 && split) {
      const held = session.tasksOf(split).slice(0, options.evalEpisodes);
      options.onPhase?.('eval', { episodes: held.length, split });
      const records: EpisodeRecord[] = await session.play({
        answerer: policyAnswerer(trainable.policy({ temperature: 0 }) as HfPolicy, AGENT_MODEL_NAME),
        tasks: held,
        group: 1,
        seed: deriveSeed(seed, 'eval'),
        idPrefix: 'eval.',
      });
      result.eval = { ...summarizeAgentRecords(records), split };
    }
    return result;
  } finally {
    await session.close();
  }
}
