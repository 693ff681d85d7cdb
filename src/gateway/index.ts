// agent-r1-ts/gateway: train an agent written with any OpenAI client (the Vercel AI SDK, the openai
// package, LangGraph.js) through a recording gateway, and replay its code against its records.
export { Gateway, GATEWAY_DEFAULTS, policyAnswerer } from './gateway.ts';
export type { GatewayOptions } from './gateway.ts';
export { EPISODE_HEADER } from '../openai/episode-gateway.ts';
export { agentRecord, recordedRequests } from './agent-record.ts';
export { AGENT_SCENARIO_ID, isAgentRecord } from '../record/agent.ts';
export type { AgentRequest, AgentTurn, EpisodeEnd, EpisodeSlot } from './agent-record.ts';
export { loadAgent, AgentModuleError } from './agent-module.ts';
export type { AgentClient, AgentFunction, AgentModule, AgentResult, Demonstrator } from './agent-module.ts';
export { AgentSession, AGENT_MODEL_NAME } from './agent-session.ts';
export type { AgentSessionOptions } from './agent-session.ts';
export { playAgent, runAgent, summarizeAgentRecords } from './play-agent.ts';
export type { PlayAgentOptions } from './play-agent.ts';
export { replayAgent, ReplayGateway, checkAgentRecord, firstDifference } from './replay-agent.ts';
export type { AgentReplayResult } from './replay-agent.ts';
export { DemonstratorAnswerer } from './demonstrator-answerer.ts';
export { TeacherAnswerer, teacherBaseURL, teacherModel } from './teacher-answerer.ts';
export type { TeacherOptions } from './teacher-answerer.ts';
export { NotARecordFileError, RecordFile, RecordFileError } from './record-file.ts';
export { MissingSplitError, readTasksFile, TasksFileError, tasksOfSplit } from './tasks-file.ts';
export {
  BadEpisodeIdError,
  BadRewardError,
  EpisodeClosedError,
  TeacherError,
  TeacherUrlError,
  TooManyTurnsError,
  UnknownEpisodeError,
} from './errors.ts';
