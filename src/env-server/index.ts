// agent-r1-ts/env: serve scenarios over OpenEnv's protocol (WebSocket /ws, HTTP /reset /step /state
// /metadata /schema /health), and a client for such servers
export { EnvServer, DEFAULT_ENV_PORT, DEFAULT_MAX_SESSIONS, DEFAULT_IDLE_TIMEOUT_MS } from './server.ts';
export type { EnvServerOptions } from './server.ts';
export { connectEnv, EnvClient, envSocketUrl } from './client.ts';
export type { EnvClientOptions } from './client.ts';
export {
  ENV_ERROR_CODES,
  actionSchema,
  resetArgsSchema,
  observationSchema,
  stateSchema,
  envJsonSchemas,
} from './protocol.ts';
export type { EnvAction, EnvObservation, EnvState, EnvStepResult, EnvErrorCode, ResetArgs } from './protocol.ts';
export { actionOutput } from './action-text.ts';
export {
  EnvServerError,
  EnvConnectionError,
  EnvProtocolError,
  EnvServerStartError,
  EpisodeAbandonedError,
} from './errors.ts';
