// Lists server-filesystem's tools and name into catalog.json (after an upgrade of the server):
//   npx tsx --conditions=source scenarios/files/update-catalog.ts
// test/scenarios/files.test.ts fails while the file differs from what the installed server lists.
import { listMcpCatalog, McpServer, writeMcpCatalog } from 'agent-r1-ts/mcp';
import { CATALOG_FILE, filesystemPackage } from './server.ts';

const server = new McpServer({ command: process.execPath, args: (dir) => [filesystemPackage().entry, dir] });
const catalog = await listMcpCatalog(server);
writeMcpCatalog(CATALOG_FILE, catalog);
console.log(
  `${CATALOG_FILE.pathname}: ${catalog.server.name}@${catalog.server.version}, ${catalog.tools.length} tools`,
);
