import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import { McpServerGoneError, McpStartError } from './errors.ts';
import { ProcessTransport, type ProcessParams } from './process-transport.ts';
import { type McpSdk, mcpSdk } from './sdk.ts';

/** Where a server is: a command that starts it (stdio), or the URL of one already running (Streamable HTTP). */
export type McpEndpoint =
  | ({ kind: 'stdio' } & ProcessParams)
  | { kind: 'http'; url: URL; headers?: { [name: string]: string } };

export interface ServerInfo {
  name: string;
  version: string;
}

export interface ConnectOptions {
  /** A label for messages. */
  label: string;
  /** The root to announce (a file:// URI): the client then offers MCP roots and can move them later. */
  root?: string;
  /** The most time the start and the handshake may take (ms). */
  timeoutMs: number;
}

/** How many pages of tools/list are followed before the server is taken to loop. */
const MAX_PAGES = 1000;

/** One connection to one server: the SDK's Client over our stdio transport or the SDK's HTTP one. */
export class McpConnection {
  private gone: string | undefined;
  private root: string | undefined;
  private rootsAsked: (() => void) | undefined;

  private constructor(
    readonly client: Client,
    readonly label: string,
    readonly info: ServerInfo,
    private readonly process: ProcessTransport | undefined,
    private readonly http: StreamableHTTPClientTransport | undefined,
    private readonly sdk: McpSdk,
  ) {}

  static async open(endpoint: McpEndpoint, options: ConnectOptions): Promise<McpConnection> {
    // The SDK is an optional dependency, loaded by the first connection.
    const sdk = await mcpSdk();
    const { Client, ErrorCode, ListRootsRequestSchema, McpError, StreamableHTTPClientTransport } = sdk;
    const client = new Client(
      { name: 'agent-r1-ts', version: '0.1.0' },
      { capabilities: options.root === undefined ? {} : { roots: { listChanged: true } } },
    );
    let root = options.root;
    let connection: McpConnection | undefined;
    if (root !== undefined) {
      client.setRequestHandler(ListRootsRequestSchema, () => {
        const current = connection?.root ?? root!;
        // Answered on the next turn of the loop: the server has our answer by the time a waiter runs.
        const asked = connection?.rootsAsked;
        if (asked) setImmediate(asked);
        return { roots: [{ uri: current }] };
      });
    }
    const process = endpoint.kind === 'stdio' ? new ProcessTransport(endpoint, sdk) : undefined;
    const http =
      endpoint.kind === 'http'
        ? new StreamableHTTPClientTransport(endpoint.url, { requestInit: { headers: endpoint.headers } })
        : undefined;
    try {
      await client.connect((process ?? http)!, { timeout: options.timeoutMs });
    } catch (err) {
      // Whether it had exited before we stop it: closing the client ends the process too.
      const exited = process?.exit;
      await client.close().catch(() => {});
      const reason = exited
        ? `it exited (${exitText(exited)})`
        : err instanceof McpError && err.code === ErrorCode.RequestTimeout
          ? `it did not answer initialize within ${options.timeoutMs} ms, and was stopped`
          : err instanceof Error
            ? err.message
            : String(err);
      throw new McpStartError(options.label, reason, process?.stderrTail() ?? '', { cause: err });
    }
    const version = client.getServerVersion();
    const info = { name: version?.name ?? 'unknown', version: version?.version ?? 'unknown' };
    connection = new McpConnection(client, options.label, info, process, http, sdk);
    connection.root = root;
    root = undefined;
    client.onclose = () => {
      connection!.gone ??=
        process?.unusable ?? (process?.exit ? `it exited: ${exitText(process.exit)}` : 'the connection closed');
    };
    return connection;
  }

  /** Why the server is gone, or undefined while it is there. */
  get whyGone(): string | undefined {
    return (
      this.gone ??
      this.process?.unusable ??
      (this.process?.exit ? `it exited: ${exitText(this.process.exit)}` : undefined)
    );
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  /** Every tool the server lists, following `nextCursor` page by page. */
  async listTools(timeoutMs: number): Promise<McpToolInfo[]> {
    const tools: McpToolInfo[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const listed = await this.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
      tools.push(...listed.tools);
      cursor = listed.nextCursor;
      if (cursor === undefined) return tools;
      if (seen.has(cursor)) throw new McpStartError(this.label, `tools/list returned the cursor "${cursor}" twice`);
      seen.add(cursor);
    }
    throw new McpStartError(this.label, `tools/list did not end after ${MAX_PAGES} pages`);
  }

  /** Calls a tool. Rejects when the server is gone, on a protocol error, or when `signal` aborts. */
  async call(
    name: string,
    args: { [key: string]: unknown },
    options: { signal?: AbortSignal; timeoutMs: number },
  ): Promise<CallToolResult> {
    if (this.whyGone !== undefined) throw new McpServerGoneError(this.label, this.whyGone);
    try {
      return (await this.client.callTool({ name, arguments: args }, this.sdk.CallToolResultSchema, {
        signal: options.signal,
        // The runner's own timer fires first and aborts `signal`; this one only guards a call made without it.
        timeout: options.timeoutMs + 1000,
      })) as CallToolResult;
    } catch (err) {
      if (this.whyGone !== undefined) throw new McpServerGoneError(this.label, this.whyGone);
      throw err;
    }
  }

  /**
   * Moves the server to another root (MCP roots): announces the change and resolves once the server
   * has asked for the new list and been answered. Whether it has applied it is the server's business:
   * `confirm` (e.g. a tool that lists its allowed folders) is asked until it says yes.
   */
  async moveRoot(uri: string, confirm: (() => Promise<boolean>) | undefined, timeoutMs: number): Promise<void> {
    this.root = uri;
    const asked = new Promise<void>((resolve) => {
      this.rootsAsked = resolve;
    });
    await this.client.sendRootsListChanged();
    await withTimeout(asked, timeoutMs, () => new McpStartError(this.label, 'it did not ask for the new roots'));
    this.rootsAsked = undefined;
    if (!confirm) return;
    const deadline = performance.now() + timeoutMs;
    while (!(await confirm())) {
      if (performance.now() > deadline) throw new McpStartError(this.label, `it did not move to the root ${uri}`);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /** Keeps the thread alive while in use, or lets it exit while idle (stdio servers; HTTP needs nothing). */
  hold(inUse: boolean): void {
    if (inUse) this.process?.ref();
    else this.process?.unref();
  }

  /** Ends the server for good; its calls from now on fail, saying `why`. */
  async stop(why: string): Promise<void> {
    this.gone ??= why;
    await this.close();
  }

  async close(): Promise<void> {
    this.gone ??= 'closed';
    if (this.http) await this.http.terminateSession().catch(() => {});
    await this.client.close().catch(() => {});
  }

  /** Kills the server's process (tests: a server that dies mid-episode). */
  kill(signal: NodeJS.Signals = 'SIGKILL'): boolean {
    const pid = this.process?.pid;
    if (pid === undefined) return false;
    process.kill(pid, signal);
    return true;
  }
}

function exitText(exit: { code: number | null; signal: NodeJS.Signals | null }): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

async function withTimeout<T>(work: Promise<T>, ms: number, error: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
