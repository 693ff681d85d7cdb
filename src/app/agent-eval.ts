import type { EpisodeRecord, Task } from '../core/types.ts';
import type { AgentModule } from '../gateway/agent-module.ts';
import { AGENT_MODEL_NAME, AgentSession } from '../gateway/agent-session.ts';
import { policyAnswerer } from '../gateway/gateway.ts';
import { summarizeAgentRecords } from '../gateway/play-agent.ts';
import { tasksOfSplit } from '../gateway/tasks-file.ts';
import type { ServedPolicy } from '../openai/chat-format.ts';
import type { RolloutSummary } from '../rollout/summary.ts';

/** What eval needs a split for (the error when a tasks file has none of it says so). */
export const EVAL_SPLIT_PURPOSE = 'the tasks eval plays';

export interface AgentEvalOptions {
  agent: AgentModule;
  /** Every task of the tasks file, and the file's name (for the error when the split has none). */
  tasks: readonly Task[];
  tasksFile: string;
  split: string;
  /** The split's first `episodes` tasks are played (all of them, when it has fewer). */
  episodes: number;
  seed: number;
  /** The model the agent's client reaches: a checkpoint or a Hugging Face model, served by the gateway. */
  policy: ServedPolicy;
  /** An agent run that has not returned by then is written as failed. */
  timeoutMs: number;
  maxTurns?: number;
  maxTokensPerTurn?: number;
}

export interface AgentEvalResult {
  records: EpisodeRecord[];
  summary: RolloutSummary;
}

/**
 * `eval --agent`: the agent's own code on a split's tasks, its client answered by a model through the
 * recording gateway (no training), each run an episode record; what `eval` prints for a scenario.
 */
export async function evaluateAgent(options: AgentEvalOptions): Promise<AgentEvalResult> {
  const tasks = tasksOfSplit(options.tasks, options.split, options.tasksFile, EVAL_SPLIT_PURPOSE).slice(
    0,
    options.episodes,
  );
  const session = await AgentSession.open({
    agent: options.agent,
    tasks: options.tasks,
    seed: options.seed,
    timeoutMs: options.timeoutMs,
    maxTurns: options.maxTurns,
    maxTokensPerTurn: options.maxTokensPerTurn,
  });
  try {
    const records = await session.play({
      answerer: policyAnswerer(options.policy, AGENT_MODEL_NAME),
      tasks,
      group: 1,
      seed: options.seed,
    });
    return { records, summary: summarizeAgentRecords(records) };
  } finally {
    await session.close();
  }
}
