import type { EpisodeRecord, Message } from '../core/types.ts';
import { historyToOpenAI } from '../openai/messages.ts';
import { isStepLevel, shownContexts } from '../record/step-context.ts';
import type { OpenAIMessage } from '../openai/wire.ts';
import type { OpenAITool } from '../tools/tool.ts';

/**
 * One episode as training data, in the shape Python RL and SFT trainers read (TRL, verl, OpenRLHF):
 * OpenAI chat messages with tool calls and tool results, the tools, the rewards, and the keys to
 * group and trace it. Field names are snake_case, as those tools expect.
 */
export interface EpisodeRow {
  episode_id: string;
  run_id: string;
  index: number;
  scenario: string;
  task_id: string;
  split: string;
  /** GRPO group key and the sample's index in it. */
  group: string;
  sample: number;
  seed: number;
  policy: string;
  policy_version: string;
  /**
   * A step-level episode is exported one row per step (what verl's agent loop and other step-level
   * trainers read): `step` is its index, `messages` what the step was shown followed by its action.
   * Null for a row that holds a whole (concatenated) episode.
   */
  step: number | null;
  messages: ExportMessage[];
  tools: OpenAITool[];
  rewards: { outcome: number; process: number; total: number };
  /** Process reward of each assistant turn in `messages`, in order. */
  turn_rewards: number[];
  success: boolean;
  end_reason: string;
  answer: string | null;
  /** Scenario metrics of the outcome (em, f1, …). */
  metrics: { [key: string]: number };
}

/** A message with every field present (null where it does not apply), so each row has one shape (parquet needs that). */
export interface ExportMessage {
  role: OpenAIMessage['role'];
  content: string | null;
  tool_calls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> | null;
  tool_call_id: string | null;
}

/**
 * The record's conversation as OpenAI messages: the prompt, each action (tool calls as structured
 * `tool_calls` with ids `call_<turn>_<i>`, arguments as a JSON string), each observation as tool
 * results (or as a user message after an action without calls). This is the conversation the policy
 * had, in the form an OpenAI-format trainer replays.
 */
export function recordMessages(record: EpisodeRecord): ExportMessage[] {
  const history = [...record.prompt];
  for (const turn of record.turns) {
    history.push({ role: 'assistant', content: turn.text });
    if (turn.observation !== null) history.push({ role: 'tool', content: turn.observation });
  }
  return exportMessages(history);
}

function exportMessages(history: readonly Message[]): ExportMessage[] {
  return historyToOpenAI(history).map((m) => ({
    role: m.role,
    content: m.content,
    tool_calls: m.role === 'assistant' && m.tool_calls ? m.tool_calls : null,
    tool_call_id: m.role === 'tool' ? m.tool_call_id : null,
  }));
}

/** A record as export rows: one for a concatenated episode, one per step for a step-level one. */
export function recordToRows(record: EpisodeRecord, tools: readonly OpenAITool[]): EpisodeRow[] {
  if (!isStepLevel(record)) return [recordToRow(record, tools)];
  const shown = shownContexts(record);
  return record.turns.map((turn, i) => ({
    ...recordToRow(record, tools),
    step: i,
    messages: exportMessages([...shown[i]!.messages, { role: 'assistant', content: turn.text }]),
    turn_rewards: [turn.reward],
  }));
}

export function recordToRow(record: EpisodeRecord, tools: readonly OpenAITool[]): EpisodeRow {
  return {
    episode_id: record.episodeId,
    run_id: record.runId,
    index: record.index,
    scenario: record.scenario.id,
    task_id: record.task.id,
    split: record.task.split,
    group: record.group,
    sample: record.sample,
    seed: record.seed,
    policy: record.policy.id,
    policy_version: record.policy.version,
    step: null,
    messages: recordMessages(record),
    tools: tools.map((t) => structuredClone(t)),
    rewards: { outcome: record.outcome.reward, process: record.processReward, total: record.totalReward },
    turn_rewards: record.turns.map((t) => t.reward),
    success: record.outcome.success,
    end_reason: record.endReason,
    answer: record.answer,
    metrics: { ...(record.outcome.metrics ?? {}) },
  };
}
