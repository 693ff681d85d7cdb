import type { Json } from '../core/types.ts';
import { commitEffect, type EffectLog } from '../scenario/effects.ts';
import { ToolOutput } from '../tools/tool.ts';
import { McpSessionMissingError, McpToolError } from './errors.ts';
import { mapCallResult } from './result.ts';
import {
  applyChanges,
  argumentsToServer,
  folderChanges,
  PathAlias,
  readFolder,
  type FolderContents,
} from './scratch.ts';
import type { Lease, McpServer } from './server.ts';

/** The effect an MCP call that changed the episode's folder puts in its result. */
export interface FilesEffect {
  op: 'files';
  /** Changed or new paths with their contents; removed ones as null (see readFolder). */
  changes: { [path: string]: string | null };
  [key: string]: Json;
}

function mapStrings(value: Json, f: (s: string) => string): Json {
  if (typeof value === 'string') return f(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, f));
  if (value !== null && typeof value === 'object') {
    const out: { [key: string]: Json } = {};
    for (const [k, v] of Object.entries(value)) out[k] = mapStrings(v, f);
    return out;
  }
  return value;
}

/** A tool of the catalog, as a call needs it. */
export interface CallTarget {
  /** The server's name for the tool (the agent may see another, after renaming). */
  name: string;
  /** Annotated readOnlyHint: it cannot change the folder, so the folder is not read after it. */
  readOnly: boolean;
  /** Makes the server's words stable where they differ from run to run (see McpToolsOptions.normalize). */
  normalize?: (text: string) => string;
}

/**
 * One episode's use of an MCP server: its lease (the server, its folder), and the folder's contents
 * as the calls left them (`files`, kept up to date by effects, live and in replay alike). It is the
 * ToolEnv state's `mcp` field (mcpEnv puts it there); the MCP tools find their server through it.
 */
export class McpEpisode implements EffectLog {
  applied = 0;

  constructor(
    readonly server: McpServer,
    /** The folder's contents after setup, then after each call that changed it. */
    public files: FolderContents,
    private readonly lease: Lease | undefined,
  ) {}

  /** The episode's server connection (absent in replay). */
  get connection() {
    return this.lease?.connection;
  }

  /** The episode's folder (absent in replay, where no server runs, and for shared servers). */
  get scratch(): string | undefined {
    return this.lease?.scratch;
  }

  /** Calls a tool on this episode's server; an `isError` result throws (the runner makes it an error result). */
  async call(
    target: CallTarget,
    args: { [key: string]: unknown },
    options: { signal?: AbortSignal; timeoutMs: number },
  ): Promise<ToolOutput> {
    const lease = this.lease;
    if (!lease)
      throw new McpSessionMissingError(`the episode has no ${this.server.label} server (its tools are being replayed)`);
    const alias = lease.scratch === undefined ? undefined : new PathAlias(this.server.alias, lease.scratch);
    let raw: Awaited<ReturnType<typeof lease.connection.call>>;
    try {
      raw = await lease.connection.call(target.name, alias ? argumentsToServer(args, alias) : args, options);
    } catch (err) {
      // A call given up on (its time ran out, the run stopped) that may write could still be changing
      // the episode's folder: a later call would see that change, or half of it, depending on timing.
      // The episode's own server is stopped, so its next calls say why instead. (A read-only call
      // given up on changes nothing: the server goes on answering.)
      if (options.signal?.aborted && lease.scratch !== undefined && !target.readOnly)
        await lease.connection.stop(`it was stopped after a call was given up (${target.name})`);
      throw err;
    }
    const mapped = mapCallResult(raw);
    const stable = (t: string) => {
      const aliased = alias ? alias.fromServer(t) : t;
      return target.normalize ? target.normalize(aliased) : aliased;
    };
    const text = stable(mapped.text);
    if (mapped.isError) throw new McpToolError(text);
    const data: { [key: string]: Json } = {};
    if (mapped.structured !== undefined) data['structuredContent'] = mapStrings(mapped.structured, stable);
    if (this.server.trackFiles && lease.scratch !== undefined && !target.readOnly) {
      const changes = folderChanges(this.files, await readFolder(lease.scratch));
      if (Object.keys(changes).length > 0)
        data['effects'] = [commitEffect<FilesEffect>(this, { op: 'files', changes }, (e) => this.apply(e))];
    }
    return new ToolOutput(text, Object.keys(data).length > 0 ? data : undefined);
  }

  /** Applies a files effect (live from a call, in replay from its record). */
  apply(effect: FilesEffect): void {
    this.files = applyChanges(this.files, effect.changes);
  }

  /** Gives the server back (ends it, or returns it to its pool). Safe to call twice. */
  async close(): Promise<void> {
    await this.lease?.release();
  }
}
