import type { Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import { tool, type Tool, type ToolContext } from '../tools/tool.ts';
import type { McpCatalog } from './catalog.ts';
import type { ServerInfo } from './connection.ts';
import { McpEpisode, type CallTarget } from './episode.ts';
import { McpCatalogError, McpSessionMissingError } from './errors.ts';
import { jsonSchemaParameters } from './json-schema.ts';
import { McpServer, type McpServerSpec } from './server.ts';

export interface McpToolsOptions {
  /** Only these tools (by the server's names), in this order; default: all, in the server's order. */
  include?: readonly string[];
  /** Leave these out. */
  exclude?: readonly string[];
  /** New names for some tools (server's name → the agent's): for clashes, or names a model handles better. */
  rename?: { [serverName: string]: string };
  /** New descriptions for some tools (by the server's name). */
  describe?: { [serverName: string]: string };
  /** Per-tool timeouts (ms, by the server's name); the episode's default applies to the others. */
  timeoutMs?: { [serverName: string]: number };
  /**
   * Rewrites what a server words differently from run to run (a random temporary name, a clock) in
   * its results' text, before a record keeps it, so that records repeat: `(text, tool) => text`.
   */
  normalize?: (text: string, tool: string) => string;
}

export interface McpToolset {
  tools: Tool[];
  /** The server's name and version, from its initialize result: put them in the scenario's version. */
  server: ServerInfo;
  /** The McpServer the tools call (pass it to mcpEnv). */
  mcp: McpServer;
}

/**
 * A server's tools as project Tools: `mcpTools(server)` lists them (every page of tools/list, or the
 * catalog file), picks and renames them, and gives each the server's JSON Schema as its parameters
 * (arguments are checked against it before the call) and an `execute` that calls the tool on the
 * episode's server through the SDK, with the call's timeout and AbortSignal. An `isError` result
 * becomes an error observation. Text blocks are the agent's observation; structured content, and
 * the episode folder's changes, are the result's data.
 */
export async function mcpTools(server: McpServer | McpServerSpec, options: McpToolsOptions = {}): Promise<McpToolset> {
  const mcp = server instanceof McpServer ? server : new McpServer(server);
  const catalog = await mcp.catalog();
  return { tools: toolsOf(mcp, catalog, options), server: catalog.server, mcp };
}

export function toolsOf(mcp: McpServer, catalog: McpCatalog, options: McpToolsOptions = {}): Tool[] {
  const byName = new Map(catalog.tools.map((t) => [t.name, t]));
  const named = (list: readonly string[] | undefined, what: string) => {
    const unknown = (list ?? []).filter((n) => !byName.has(n));
    if (unknown.length > 0)
      throw new McpCatalogError(
        `${what} names tools ${mcp.label} does not have: ${unknown.join(', ')}; it has: ${[...byName.keys()].join(', ')}`,
      );
  };
  named(options.include, 'include');
  named(options.exclude, 'exclude');
  named(Object.keys(options.rename ?? {}), 'rename');
  named(Object.keys(options.describe ?? {}), 'describe');
  named(Object.keys(options.timeoutMs ?? {}), 'timeoutMs');
  const exclude = new Set(options.exclude ?? []);
  const chosen = (options.include ?? catalog.tools.map((t) => t.name)).filter((n) => !exclude.has(n));
  const tools = chosen.map((name) => mcpTool(mcp, byName.get(name)!, options));
  const seen = new Set<string>();
  for (const t of tools) {
    if (seen.has(t.name)) throw new McpCatalogError(`two tools would be called "${t.name}": rename one`);
    seen.add(t.name);
  }
  return tools;
}

function mcpTool(mcp: McpServer, info: McpToolInfo, options: McpToolsOptions): Tool {
  const name = options.rename?.[info.name] ?? info.name;
  const normalize = options.normalize;
  const target: CallTarget = { name: info.name, readOnly: info.annotations?.readOnlyHint === true };
  if (normalize) target.normalize = (text) => normalize(text, info.name);
  const definition: Tool = {
    name,
    description: options.describe?.[info.name] ?? info.description ?? info.title ?? info.name,
    parameters: jsonSchemaParameters(info.inputSchema as { [key: string]: unknown }),
    execute: async (args: { [key: string]: unknown }, ctx: ToolContext) =>
      (await episodeOf(mcp, ctx.state)).call(target, args, { signal: ctx.signal, timeoutMs: ctx.timeoutMs }),
  };
  const timeout = options.timeoutMs?.[info.name];
  if (timeout !== undefined) definition.timeoutMs = timeout;
  try {
    return tool(definition);
  } catch (err) {
    throw new McpCatalogError(
      `${mcp.label}'s tool "${info.name}": ${(err as Error).message}; give it a name with rename`,
    );
  }
}

/** The episode's use of the server: its state's `mcp` field, or, for a shared server without mcpEnv, a connection of the pool. */
async function episodeOf(mcp: McpServer, state: unknown): Promise<McpEpisode> {
  const own = (state as { mcp?: unknown } | null | undefined)?.mcp;
  if (own instanceof McpEpisode && own.server === mcp) return own;
  if (mcp.isolation !== 'shared')
    throw new McpSessionMissingError(
      `${mcp.label} gives each episode a server of its own (isolation "${mcp.isolation}"): make the scenario's env with mcpEnv(server, env)`,
    );
  return new McpEpisode(mcp, {}, await mcp.lease());
}
