import { basename } from 'node:path';
import { pathToFileURL } from 'node:url';
import { McpConnection, type McpEndpoint } from './connection.ts';
import { catalogPath, checkedCatalog, readMcpCatalog, type McpCatalog } from './catalog.ts';
import { McpServerMismatchError } from './errors.ts';
import { mapCallResult } from './result.ts';
import { makeScratch, removeScratch } from './scratch.ts';

/**
 * How episodes share a server:
 * - `shared`: a few connections serve every episode (a stateless server);
 * - `episode`: each episode starts its own server on its own scratch folder, and ends it;
 * - `spare`: the same, with servers started ahead on folders of their own (for stateful servers that
 *   cannot be moved: each gets its own data file, e.g. server-memory's MEMORY_FILE_PATH);
 * - `roots`: warm servers, each moved to the episode's folder through MCP roots (server-filesystem).
 */
export type McpIsolation = 'shared' | 'episode' | 'spare' | 'roots';

export interface McpServerSpec {
  /** stdio: the command that starts the server. */
  command?: string;
  /** Its arguments; a function of the scratch folder gives each server its own (not with `shared`). */
  args?: readonly string[] | ((scratch: string) => readonly string[]);
  /** Environment added to a minimal one (HOME, PATH, …); a function of the scratch folder, as args. */
  env?: { [name: string]: string } | ((scratch: string) => { [name: string]: string });
  cwd?: string;
  /** Streamable HTTP: the URL of a running server (instead of a command). */
  url?: string | URL;
  headers?: { [name: string]: string };
  /** A name for messages, some of which records keep (default: the command's file name, or the URL). */
  label?: string;
  /** Default: `episode` for a command, `shared` for a URL. */
  isolation?: McpIsolation;
  /** shared: how many connections serve the episodes (default 1). */
  connections?: number;
  /** spare, roots: servers kept started ahead (default 2). */
  spares?: number;
  /** episode, spare, roots: the most servers episodes use at once in one thread (default 8); more wait. */
  maxServers?: number;
  /**
   * roots: asked after a move until it says the server follows the new root (roots are applied by
   * the server in its own time). `call` calls a tool and gives its text; `root` is the folder.
   */
  confirmRoot?: (
    call: (tool: string, args: { [key: string]: unknown }) => Promise<string>,
    root: string,
  ) => Promise<boolean>;
  /** The name the agent sees for the episode's folder (default `/workspace`). */
  alias?: string;
  /**
   * Record the scratch folder's contents after each call that may change it (one not annotated
   * readOnlyHint), as effects in the call's result: the ToolEnv judges from the files, live and in
   * replay with no server (default: on where there is a scratch folder).
   */
  trackFiles?: boolean;
  /** The server's tools and name, listed before (writeMcpCatalog writes a file of them): tools without starting a server. */
  catalog?: McpCatalog | string | URL;
  /** The most time a server may take to start and answer (ms, default 30 000). */
  startTimeoutMs?: number;
}

/** A server given to one episode: its connection, its folder, and how to give it back. */
export interface Lease {
  connection: McpConnection;
  scratch?: string;
  release(): Promise<void>;
}

interface Spare {
  connection: McpConnection;
  scratch: string;
}

/** An MCP server as the episodes of one thread use it: started, pooled, moved, ended. */
export class McpServer {
  readonly label: string;
  readonly isolation: McpIsolation;
  readonly alias: string;
  readonly trackFiles: boolean;
  private readonly timeoutMs: number;
  private readonly slots: Slots;
  private listed: Promise<McpCatalog> | undefined;
  private pool: Promise<McpConnection[]> | undefined;
  private next = 0;
  /** spare: servers started ahead; roots: warm servers waiting for an episode. */
  private readonly ready: Array<Promise<Spare>> = [];
  private readonly idle: Spare[] = [];
  private readonly live = new Set<McpConnection>();
  private startedCount = 0;

  constructor(readonly spec: McpServerSpec) {
    if ((spec.command === undefined) === (spec.url === undefined))
      throw new TypeError('an MCP server needs either a command (stdio) or a url (Streamable HTTP)');
    this.isolation = spec.isolation ?? (spec.url === undefined ? 'episode' : 'shared');
    if (spec.url !== undefined && this.isolation !== 'shared' && this.isolation !== 'episode')
      throw new TypeError(
        `isolation "${this.isolation}" starts servers: a server at a URL can be shared, or give each episode a session of its own ("episode")`,
      );
    if (this.isolation === 'shared' && (typeof spec.args === 'function' || typeof spec.env === 'function'))
      throw new TypeError('args or env that depend on the scratch folder need isolation "episode", "spare" or "roots"');
    // Messages that name the server reach records (a call to a server that died): no path in the default.
    this.label = spec.label ?? (spec.url !== undefined ? String(spec.url) : basename(spec.command!));
    this.alias = spec.alias ?? '/workspace';
    this.timeoutMs = spec.startTimeoutMs ?? 30_000;
    this.trackFiles = spec.trackFiles ?? this.hasScratch;
    this.slots = new Slots(spec.maxServers ?? 8);
  }

  /** Whether each episode's server works in a folder of its own. */
  get hasScratch(): boolean {
    return this.spec.command !== undefined && this.isolation !== 'shared';
  }

  /** The server's name and tools: from the catalog file when there is one, else listed from a server started for it. */
  catalog(): Promise<McpCatalog> {
    this.listed ??= (async () => {
      const given = this.spec.catalog;
      if (typeof given === 'object' && !(given instanceof URL)) return checkedCatalog(given, 'the catalog given');
      if (given !== undefined) return readMcpCatalog(given);
      return listMcpCatalog(this);
    })();
    return this.listed;
  }

  /** A server for one episode, its folder made and `setup` run on it first (the server sees it ready). */
  async lease(setup?: (scratch: string) => Promise<void> | void): Promise<Lease> {
    if (this.isolation === 'shared') {
      const pool = await this.sharedPool();
      const connection = pool[this.next++ % pool.length]!;
      return { connection, release: async () => {} };
    }
    await this.slots.take();
    let scratch: string | undefined;
    let connection: McpConnection | undefined;
    try {
      if (this.isolation === 'spare') {
        const spare = await (this.ready.shift() ?? this.startSpare());
        this.refill();
        ({ connection, scratch } = spare);
        await setup?.(scratch);
      } else {
        scratch = this.spec.command === undefined ? undefined : makeScratch();
        if (scratch !== undefined) await setup?.(scratch);
        if (this.isolation === 'roots') {
          this.refill();
          connection = (await this.takeWarm()).connection;
          await this.moveRoot(connection, scratch!);
        } else connection = await this.connect(scratch);
      }
      connection.hold(true);
    } catch (err) {
      if (connection) await this.end(connection);
      if (scratch !== undefined) removeScratch(scratch);
      this.slots.give();
      throw err;
    }
    const leased = connection;
    const folder = scratch;
    let released = false;
    return {
      connection: leased,
      scratch: folder,
      release: async () => {
        if (released) return;
        released = true;
        try {
          if (this.isolation === 'roots' && leased.whyGone === undefined) {
            leased.hold(false);
            this.idle.push({ connection: leased, scratch: this.homeOf.get(leased)! });
          } else await this.end(leased);
        } finally {
          if (folder !== undefined) removeScratch(folder);
          this.slots.give();
        }
      },
    };
  }

  /** Ends every server this thread keeps (pool, spares, warm ones); leased ones end with their episodes. */
  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    const ready = this.ready.splice(0);
    const idle = this.idle.splice(0);
    await Promise.all([
      ...(pool
        ? [
            pool.then(
              (cs) => Promise.all(cs.map((c) => this.end(c))),
              () => {},
            ),
          ]
        : []),
      // A spare's folder is its own until an episode takes it: removed with it.
      ...ready.map((p) =>
        p.then(
          (s) => this.end(s.connection).finally(() => removeScratch(s.scratch)),
          () => {},
        ),
      ),
      ...idle.map((s) => this.end(s.connection)),
    ]);
  }

  /** How many connections this server has opened so far (a replay with recorded results opens none). */
  get started(): number {
    return this.startedCount;
  }

  /** How many server connections are open now (pooled, spare, warm and leased). */
  get openConnections(): number {
    return this.live.size;
  }

  private readonly homeOf = new Map<McpConnection, string>();

  private async end(connection: McpConnection): Promise<void> {
    this.live.delete(connection);
    await connection.close();
    const home = this.homeOf.get(connection);
    if (home !== undefined) {
      this.homeOf.delete(connection);
      removeScratch(home);
    }
  }

  private sharedPool(): Promise<McpConnection[]> {
    if (!this.pool) {
      const n = Math.max(1, this.spec.connections ?? 1);
      const pool = Promise.all(Array.from({ length: n }, () => this.connect(undefined)));
      pool.then(
        (cs) => cs.forEach((c) => c.hold(false)),
        () => {},
      );
      // A pool that failed to start is tried again by the next episode, not kept failed for the run.
      pool.catch(() => {
        if (this.pool === pool) this.pool = undefined;
      });
      this.pool = pool;
    }
    return this.pool;
  }

  /** Starts a server (on `scratch`, for servers per episode) and checks it is the one the catalog names. */
  async connect(scratch: string | undefined, root?: string): Promise<McpConnection> {
    const { spec } = this;
    const endpoint: McpEndpoint =
      spec.command !== undefined
        ? {
            kind: 'stdio',
            command: spec.command,
            args: typeof spec.args === 'function' ? spec.args(scratch!) : (spec.args ?? []),
            env: typeof spec.env === 'function' ? spec.env(scratch!) : spec.env,
            cwd: spec.cwd,
          }
        : { kind: 'http', url: new URL(String(spec.url)), headers: spec.headers };
    this.startedCount++;
    const connection = await McpConnection.open(endpoint, { label: this.label, root, timeoutMs: this.timeoutMs });
    this.live.add(connection);
    if (this.spec.catalog !== undefined) {
      const expected = (await this.catalog()).server;
      if (expected.name !== connection.info.name || expected.version !== connection.info.version) {
        await this.end(connection);
        const given = this.spec.catalog;
        const where = typeof given === 'object' && !(given instanceof URL) ? 'given' : catalogPath(given);
        throw new McpServerMismatchError(expected, connection.info, where);
      }
    }
    return connection;
  }

  private startSpare(): Promise<Spare> {
    const scratch = makeScratch();
    const started = (async () => {
      try {
        const root = this.isolation === 'roots' ? pathToFileURL(scratch).href : undefined;
        const connection = await this.connect(scratch, root);
        connection.hold(false);
        if (this.isolation === 'roots') this.homeOf.set(connection, scratch);
        return { connection, scratch };
      } catch (err) {
        removeScratch(scratch);
        throw err;
      }
    })();
    started.catch(() => {}); // a spare that failed is reported to the episode that takes it
    return started;
  }

  /** Keeps `spares` servers starting or ready (the idle warm ones count for roots). */
  private refill(): void {
    const want = Math.max(0, this.spec.spares ?? 2);
    while (this.ready.length + this.idle.length < want) this.ready.push(this.startSpare());
  }

  private async takeWarm(): Promise<Spare> {
    while (this.idle.length > 0) {
      const warm = this.idle.pop()!;
      if (warm.connection.whyGone === undefined) return warm;
      await this.end(warm.connection);
    }
    return this.ready.shift() ?? this.startSpare();
  }

  private async moveRoot(connection: McpConnection, scratch: string): Promise<void> {
    const confirm = this.spec.confirmRoot;
    const call = async (tool: string, args: { [key: string]: unknown }) =>
      mapCallResult(await connection.call(tool, args, { timeoutMs: this.timeoutMs })).text;
    await connection.moveRoot(
      pathToFileURL(scratch).href,
      confirm ? () => confirm(call, scratch) : undefined,
      this.timeoutMs,
    );
  }
}

/** Starts a server just to list it: its name and version, and every page of its tools. */
export async function listMcpCatalog(server: McpServer): Promise<McpCatalog> {
  const scratch = server.hasScratch ? makeScratch() : undefined;
  const probe = new McpServer({ ...server.spec, catalog: undefined });
  try {
    const root = server.isolation === 'roots' && scratch !== undefined ? pathToFileURL(scratch).href : undefined;
    const connection = await probe.connect(scratch, root);
    try {
      return { server: connection.info, tools: await connection.listTools(server.spec.startTimeoutMs ?? 30_000) };
    } finally {
      await connection.close();
    }
  } finally {
    if (scratch !== undefined) removeScratch(scratch);
  }
}

/** A counting semaphore: at most `n` holders; the others wait in order. */
class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly n: number) {
    if (!(n >= 1)) throw new TypeError(`maxServers must be at least 1, got ${n}`);
  }

  take(): Promise<void> {
    if (this.used < this.n) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}
