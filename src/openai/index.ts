// agent-r1-ts/openai: serve a token policy behind an OpenAI-compatible API, use any OpenAI-compatible
// endpoint as a policy, convert episodes to OpenAI chat messages; export runs as training data
export { ChatServer, DEFAULT_MAX_BODY_BYTES } from './server.ts';
export type { ChatServerOptions, RequestLogEntry } from './server.ts';
export { ServingPolicy } from './serving-policy.ts';
export type { ServablePolicy } from './serving-policy.ts';
export { ChatBridge } from './chat-bridge.ts';
export { OpenAIPolicy, openAIPolicyFromSpec, openAIOptionsFromSpec, readCompletion } from './external-policy.ts';
export type { OpenAIPolicyOptions } from './external-policy.ts';
export {
  actionToAssistant,
  assistantToAction,
  historyToOpenAI,
  observationToToolMessages,
  joinToolResults,
} from './messages.ts';
export { chatCompletionRequestSchema } from './wire.ts';
export type { OpenAIMessage, OpenAIToolCall, AssistantMessage, ChatCompletion } from './wire.ts';
export { OpenAIHttpError, ExternalPolicyError, PolicySpecError } from './errors.ts';
export { exportRun, readRun, recordsToRows, ExportError, EXPORT_FORMATS } from '../export/export-run.ts';
export type { ExportFormat, ExportOptions, ExportResult } from '../export/export-run.ts';
export { recordToRow, recordMessages } from '../export/episode-row.ts';
export type { EpisodeRow, ExportMessage } from '../export/episode-row.ts';
export { rowsToParquet } from '../export/parquet.ts';
