import { createRequire } from 'node:module';
import { importOptional } from 'agent-r1-ts';
import { McpServer, type McpCatalog, type McpIsolation } from 'agent-r1-ts/mcp';
// Imported, not read from a path: the build copies it to dist/ and the worker bundle inlines it.
import listed from './catalog.json' with { type: 'json' };

/** The tools and server name as listed (update-catalog.ts): the scenario loads, and replays, with no server. */
export const CATALOG = listed as unknown as McpCatalog;

const PACKAGE = '@modelcontextprotocol/server-filesystem';
const require = createRequire(import.meta.url);

/**
 * server-filesystem's entry script, and the installed package's own version: the server reports a
 * label of its own in `initialize` (0.2.0 across releases), so records name both, and a server
 * upgrade shows in them. An optional dependency of agent-r1-ts (npm brings it, nothing is fetched at
 * run time; only this scenario needs it): one not installed fails the scenario's load, naming it.
 */
export function filesystemPackage(): { entry: string; version: string } {
  return importOptional(PACKAGE, 'the files scenario', () => ({
    entry: require.resolve(`${PACKAGE}/dist/index.js`),
    version: (require(`${PACKAGE}/package.json`) as { version: string }).version,
  }));
}

/** Where update-catalog.ts writes the listing. */
export const CATALOG_FILE = new URL('./catalog.json', import.meta.url);

/**
 * The filesystem server, one per episode in effect: by default warm servers moved to each episode's
 * folder through MCP roots (the old folder is refused once moved); `episode` starts one per episode.
 */
export function filesystemServer(
  isolation: McpIsolation = 'roots',
  extra: { maxServers?: number; spares?: number } = {},
) {
  const { entry } = filesystemPackage();
  return new McpServer({
    command: process.execPath,
    args: (dir) => [entry, dir],
    label: 'server-filesystem',
    isolation,
    ...extra,
    catalog: CATALOG,
    // Moved: its list of allowed folders is the episode's folder.
    confirmRoot: async (call, root) => (await call('list_allowed_directories', {})).split('\n').includes(root),
  });
}
