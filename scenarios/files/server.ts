import { createRequire } from 'node:module';
import { McpServer, type McpCatalog, type McpIsolation } from 'agent-r1-ts/mcp';
// Imported, not read from a path: the build copies it to dist/ and the worker bundle inlines it.
import listed from './catalog.json' with { type: 'json' };

/** The tools and server name as listed (update-catalog.ts): the scenario loads, and replays, with no server. */
export const CATALOG = listed as unknown as McpCatalog;

/** server-filesystem's entry script (a dependency of agent-r1-ts: npm ci brings it, nothing is fetched). */
export const FILESYSTEM_SERVER = createRequire(import.meta.url).resolve(
  '@modelcontextprotocol/server-filesystem/dist/index.js',
);

/**
 * The installed server package's own version: the server reports a label of its own in `initialize`
 * (0.2.0 across releases), so records name both, and a server upgrade shows in them.
 */
export const FILESYSTEM_PACKAGE_VERSION = (
  createRequire(import.meta.url)('@modelcontextprotocol/server-filesystem/package.json') as { version: string }
).version;

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
  return new McpServer({
    command: process.execPath,
    args: (dir) => [FILESYSTEM_SERVER, dir],
    label: 'server-filesystem',
    isolation,
    ...extra,
    catalog: CATALOG,
    // Moved: its list of allowed folders is the episode's folder.
    confirmRoot: async (call, root) => (await call('list_allowed_directories', {})).split('\n').includes(root),
  });
}
