import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { threadId } from 'node:worker_threads';
import type { Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import type { ServerInfo } from './connection.ts';
import { McpCatalogError } from './errors.ts';

/**
 * What a server offers, as listed once: its name and version (from initialize) and its tools (every
 * page of tools/list). Kept in a file beside a scenario, it lets the scenario be loaded, and its
 * episodes replayed, with no server running; a live server that is not the one listed is refused.
 */
export interface McpCatalog {
  server: ServerInfo;
  tools: McpToolInfo[];
}

export function catalogPath(file: string | URL): string {
  return file instanceof URL ? fileURLToPath(file) : file;
}

export function readMcpCatalog(file: string | URL): McpCatalog {
  const path = catalogPath(file);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new McpCatalogError(`the MCP tool catalog ${path} cannot be read: ${(err as Error).message}`);
  }
  return checkedCatalog(parsed, path);
}

/** The value, if it has a catalog's shape; `where` names it in the error. */
export function checkedCatalog(parsed: unknown, where: string): McpCatalog {
  const c = parsed as Partial<McpCatalog>;
  const ok =
    c !== null &&
    typeof c === 'object' &&
    typeof c.server?.name === 'string' &&
    typeof c.server?.version === 'string' &&
    Array.isArray(c.tools) &&
    c.tools.every((t) => typeof t?.name === 'string' && t.inputSchema !== null && typeof t.inputSchema === 'object');
  if (!ok) throw new McpCatalogError(`${where} is not an MCP tool catalog ({server: {name, version}, tools: [...]})`);
  return c as McpCatalog;
}

/** Writes a catalog (atomically: a scenario loaded by two threads at once reads one whole file). */
export function writeMcpCatalog(file: string | URL, catalog: McpCatalog): void {
  const path = catalogPath(file);
  const temp = `${path}.${process.pid}-${threadId}.tmp`;
  writeFileSync(temp, `${JSON.stringify(catalog, null, 2)}\n`);
  renameSync(temp, path);
}
