import { importOptional } from '../core/optional-import.ts';

const PACKAGE = '@modelcontextprotocol/sdk';
/** What needs the MCP SDK (an optional dependency: only MCP tools use it), as the messages say. */
export const MCP_NEEDED_BY = 'the MCP client (agent-r1-ts/mcp: the files scenario, MCP scenarios)';

async function load() {
  const [client, http, stdio, framing, types] = await Promise.all([
    importOptional(PACKAGE, MCP_NEEDED_BY, () => import('@modelcontextprotocol/sdk/client/index.js')),
    importOptional(PACKAGE, MCP_NEEDED_BY, () => import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
    importOptional(PACKAGE, MCP_NEEDED_BY, () => import('@modelcontextprotocol/sdk/client/stdio.js')),
    importOptional(PACKAGE, MCP_NEEDED_BY, () => import('@modelcontextprotocol/sdk/shared/stdio.js')),
    importOptional(PACKAGE, MCP_NEEDED_BY, () => import('@modelcontextprotocol/sdk/types.js')),
  ]);
  return {
    Client: client.Client,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    deserializeMessage: framing.deserializeMessage,
    serializeMessage: framing.serializeMessage,
    CallToolResultSchema: types.CallToolResultSchema,
    ListRootsRequestSchema: types.ListRootsRequestSchema,
    ErrorCode: types.ErrorCode,
    McpError: types.McpError,
  };
}

/** The parts of the MCP SDK this client uses. */
export type McpSdk = Awaited<ReturnType<typeof load>>;

let loaded: Promise<McpSdk> | undefined;

/** The SDK, loaded by the first connection (again after a failure: a package installed meanwhile is found). */
export function mcpSdk(): Promise<McpSdk> {
  const pending = (loaded ??= load());
  pending.catch(() => {
    if (loaded === pending) loaded = undefined;
  });
  return pending;
}
