// agent-r1-ts/mcp: a scenario's tools from any MCP server (stdio or Streamable HTTP), on the official
// SDK's client. Tools keep every guarantee of hand-written ones: arguments checked against the
// server's schema, the runner's timeout and abort, raw results in the records, replay with no server.
export { mcpTools, toolsOf, type McpToolsOptions, type McpToolset } from './tools.ts';
export { McpServer, listMcpCatalog, type McpServerSpec, type McpIsolation, type Lease } from './server.ts';
export { mcpEnv, type McpState, type McpToolEnv } from './env.ts';
export { McpEpisode, type FilesEffect, type CallTarget } from './episode.ts';
export { readMcpCatalog, writeMcpCatalog, type McpCatalog } from './catalog.ts';
export { McpConnection, type ServerInfo, type McpEndpoint } from './connection.ts';
export { mapCallResult, type MappedResult } from './result.ts';
export { jsonSchemaParameters } from './json-schema.ts';
export { PathAlias, readFolder, writeFolder, folderChanges, applyChanges, type FolderContents } from './scratch.ts';
export {
  McpStartError,
  McpServerGoneError,
  McpToolError,
  McpCatalogError,
  McpServerMismatchError,
  McpSessionMissingError,
  FolderPathError,
} from './errors.ts';
