import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { McpSdk } from './sdk.ts';

export interface ProcessParams {
  command: string;
  args: readonly string[];
  /** Added to the SDK's default environment (HOME, PATH, …: what a server needs, no secrets). */
  env?: { [name: string]: string };
  cwd?: string;
}

/**
 * Every server process still running, in every thread of this process: killed when the process
 * exits. A worker thread's own exit handlers do not run when the process exits (the main thread's
 * do), so each thread tells the others of the servers it starts and ends.
 */
const running = new Map<number, string>();
let channel: BroadcastChannel | undefined;

function registry(): BroadcastChannel {
  if (!channel) {
    channel = new BroadcastChannel('agent-r1-ts/mcp-server-processes');
    (channel as unknown as { unref(): void }).unref();
    channel.onmessage = (event: MessageEvent) => {
      const { pid, command } = event.data as { pid: number; command?: string };
      if (command === undefined) running.delete(pid);
      else running.set(pid, command);
    };
    // A server left running (a hung one, or one started ahead for an episode that never came) must not outlive us.
    process.once('exit', () => {
      for (const [pid, command] of running) if (isStill(pid, command)) killQuietly(pid);
    });
  }
  return channel;
}

// Listening from the start: the main thread of a rollout on workers loads the scenario but starts no server itself.
registry();

function track(pid: number, command: string | undefined): void {
  if (command === undefined) running.delete(pid);
  else running.set(pid, command);
  registry().postMessage({ pid, command });
}

/** Whether `pid` is still the process we started (a pid whose exit we missed may be someone else's by now). */
function isStill(pid: number, command: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === command;
  } catch {
    return process.platform !== 'linux'; // no /proc to ask: trust the record
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * The largest message a server may send, a tool result with its envelope (the SDK's own bound). A
 * larger answer to a call fails that call; the server goes on.
 */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** A request id at the end of a JSON-RPC line, where a response built as {result, jsonrpc, id} has it. */
const TRAILING_ID = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/;

/**
 * Splits a server's stdout into lines, none held past `max` bytes: an oversized line is dropped as
 * it streams in, keeping only its size and its last bytes (where a response names its request).
 */
export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  private tail: Buffer | undefined;

  constructor(
    private readonly max: number,
    private readonly on: { line(text: string): void; oversized(bytes: number, tail: string): void },
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      const piece = chunk.subarray(start, newline === -1 ? chunk.length : newline);
      this.size += piece.length;
      if (this.tail === undefined && this.size > this.max) {
        this.tail = Buffer.concat(this.parts);
        this.parts = [];
      }
      if (this.tail !== undefined) this.tail = lastBytes(Buffer.concat([this.tail, lastBytes(piece)]));
      else if (piece.length > 0) this.parts.push(piece);
      if (newline === -1) return;
      if (this.tail !== undefined) this.on.oversized(this.size, this.tail.toString('utf8'));
      else this.on.line(Buffer.concat(this.parts).toString('utf8').replace(/\r$/, ''));
      this.parts = [];
      this.size = 0;
      this.tail = undefined;
      start = newline + 1;
    }
  }
}

const lastBytes = (b: Buffer) => (b.length > 256 ? b.subarray(b.length - 256) : b);

/** How much of a server's stderr is kept, for the message when it fails to start or dies. */
const STDERR_TAIL = 2000;

/**
 * The stdio transport, as the SDK's StdioClientTransport, with what a pool of servers needs besides:
 * a server idle in a pool must not keep the process alive (`unref`), closing kills it at once (the
 * SDK's waits up to 2 s for it to exit by itself: 2 s per episode), the end of stderr and the exit
 * status say why a server died, servers still running when the thread exits are killed, and no
 * message over MAX_MESSAGE_BYTES is held or can end the process (the SDK's reader throws where no one
 * catches it). The message format (deserializeMessage, serializeMessage) is the SDK's own.
 */
export class ProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Set when the process has exited: its code or signal. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private child: ChildProcess | undefined;
  /** Why the stream cannot be read any more (the server is then stopped); undefined while it can. */
  unusable: string | undefined;
  private readonly reader = new LineReader(MAX_MESSAGE_BYTES, {
    line: (text) => {
      // After an unreadable message nothing more is taken from it: its answers could be to anything.
      if (text.trim() === '' || this.unusable !== undefined) return;
      let message: JSONRPCMessage;
      try {
        message = this.sdk.deserializeMessage(text);
      } catch (err) {
        this.onerror?.(err as Error);
        return;
      }
      this.onmessage?.(message);
    },
    oversized: (bytes, tail) => {
      if (this.unusable !== undefined) return;
      const why = `it sent a message of ${bytes} bytes, over the ${MAX_MESSAGE_BYTES}-byte limit`;
      const id = TRAILING_ID.exec(tail)?.[1];
      // An answer to a call: that call fails, and the server goes on.
      if (id !== undefined) {
        const message = `the server's answer was ${bytes} bytes, over the ${MAX_MESSAGE_BYTES}-byte limit on one message`;
        this.onmessage?.({ jsonrpc: '2.0', id: JSON.parse(id), error: { code: -32000, message } });
        return;
      }
      // Anything else: what it meant is unknown, so the server is stopped (its calls fail as gone).
      this.unusable = why;
      this.onerror?.(new Error(why));
      void this.close();
    },
  });
  private stderr = '';
  private referenced = true;

  constructor(
    private readonly params: ProcessParams,
    private readonly sdk: Pick<McpSdk, 'deserializeMessage' | 'serializeMessage' | 'getDefaultEnvironment'>,
  ) {}

  start(): Promise<void> {
    if (this.child) throw new Error('ProcessTransport already started');
    return new Promise((resolve, reject) => {
      const child = spawn(this.params.command, [...this.params.args], {
        env: { ...this.sdk.getDefaultEnvironment(), ...this.params.env },
        cwd: this.params.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        shell: false,
        // Its own process group: a terminal's Ctrl-C reaches the CLI, which ends its episodes and then
        // its servers; servers killed by the same keypress would fail the calls in flight first.
        detached: true,
      });
      this.child = child;
      child.once('error', (err) => {
        reject(err);
        this.onerror?.(err);
      });
      child.once('spawn', () => {
        track(child.pid!, this.params.command);
        if (!this.referenced) this.unref();
        resolve();
      });
      child.once('exit', (code, signal) => {
        track(child.pid!, undefined);
        this.exit = { code, signal };
      });
      child.once('close', () => this.onclose?.());
      child.stdout!.on('data', (chunk: Buffer) => this.reader.push(chunk));
      child.stderr!.on('data', (chunk: Buffer) => {
        this.stderr = (this.stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
      });
      child.stdin!.on('error', (err) => this.onerror?.(err));
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (this.unusable !== undefined) return Promise.reject(new Error(this.unusable));
    if (!stdin || this.exit) return Promise.reject(new Error('the server process is not running'));
    return new Promise((resolve) => {
      if (stdin.write(this.sdk.serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Ends the process: stdin closed and SIGTERM at once, SIGKILL if it is still there a second later. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.stdin?.end();
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), 1000);
    });
    if ((await Promise.race([exited, late])) === 'late') {
      child.kill('SIGKILL');
      await exited;
    }
    clearTimeout(timer);
  }

  /** The process id (for tests and diagnostics). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The end of what the server wrote to stderr, on one line. */
  stderrTail(chars = 400): string {
    return this.stderr
      .trim()
      .slice(-chars)
      .replace(/\s*\n\s*/g, ' | ');
  }

  /** Lets the process (idle in a pool) not keep this thread alive. */
  unref(): void {
    this.referenced = false;
    const child = this.child;
    if (!child) return;
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr])
      (stream as { unref?: () => void } | null)?.unref?.();
  }

  /** Keeps the thread alive while an episode uses the process. */
  ref(): void {
    this.referenced = true;
    const child = this.child;
    if (!child) return;
    child.ref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as { ref?: () => void } | null)?.ref?.();
  }
}
