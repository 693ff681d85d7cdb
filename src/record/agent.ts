import type { EpisodeRecord, Json } from '../core/types.ts';

/**
 * Records of agents trained through the gateway (src/gateway): their `scenario.id` is `agent`, and
 * each turn's `info.request` holds what the agent sent (see src/gateway/agent-record.ts). What the
 * layers below the gateway (export, the viewer's index) need to tell them apart.
 */
export const AGENT_SCENARIO_ID = 'agent';

export function isAgentRecord(record: Pick<EpisodeRecord, 'scenario'>): boolean {
  return record.scenario.id === AGENT_SCENARIO_ID;
}

/** The tools an agent's episode offered: its first request's (OpenAI function tools). */
export function agentRecordTools(record: Pick<EpisodeRecord, 'turns'>): Json[] {
  const tools = (record.turns[0]?.info?.request as { tools?: Json[] | null } | undefined)?.tools;
  return Array.isArray(tools) ? tools : [];
}
