import { spawn, type ChildProcess } from 'node:child_process';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export interface ProcessParams {
  command: string;
  args: readonly string[];
  /** Added to the SDK's default environment (HOME, PATH, …: what a server needs, no secrets). */
  env?: { [name: string]: string };
  cwd?: string;
}

/** Every server process of this thread that is still running: killed when the thread or process exits. */
const running = new Set<ChildProcess>();
let exitHook = false;

/** How much of a server's stderr is kept, for the message when it fails to start or dies. */
const STDERR_TAIL = 2000;

/**
 * The stdio transport, as the SDK's StdioClientTransport, with what a pool of servers needs besides:
 * a server idle in a pool must not keep the process alive (`unref`), closing kills it at once (the
 * SDK's waits up to 2 s for it to exit by itself: 2 s per episode), the end of stderr and the exit
 * status say why a server died, and servers still running when the thread exits are killed. The
 * framing (ReadBuffer, serializeMessage) is the SDK's own.
 */
export class ProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Set when the process has exited: its code or signal. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private child: ChildProcess | undefined;
  private readonly buffer = new ReadBuffer();
  private stderr = '';
  private referenced = true;

  constructor(private readonly params: ProcessParams) {}

  start(): Promise<void> {
    if (this.child) throw new Error('ProcessTransport already started');
    return new Promise((resolve, reject) => {
      const child = spawn(this.params.command, [...this.params.args], {
        env: { ...getDefaultEnvironment(), ...this.params.env },
        cwd: this.params.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        shell: false,
      });
      this.child = child;
      child.once('error', (err) => {
        running.delete(child);
        reject(err);
        this.onerror?.(err);
      });
      child.once('spawn', () => {
        running.add(child);
        installExitHook();
        if (!this.referenced) this.unref();
        resolve();
      });
      child.once('exit', (code, signal) => {
        running.delete(child);
        this.exit = { code, signal };
      });
      child.once('close', () => this.onclose?.());
      child.stdout!.on('data', (chunk: Buffer) => {
        this.buffer.append(chunk);
        for (;;) {
          let message: JSONRPCMessage | null;
          try {
            message = this.buffer.readMessage();
          } catch (err) {
            this.onerror?.(err as Error);
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        this.stderr = (this.stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
      });
      child.stdin!.on('error', (err) => this.onerror?.(err));
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.exit) return Promise.reject(new Error('the server process is not running'));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
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

function installExitHook(): void {
  if (exitHook) return;
  exitHook = true;
  // A server left running (a hung one, or an interrupted episode's) must not outlive us.
  process.once('exit', () => {
    for (const child of running) child.kill('SIGKILL');
  });
}
