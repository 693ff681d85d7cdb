import { AgentR1Error, UnknownNameError, UsageError } from '../core/errors.ts';
import { EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE } from './exit-codes.ts';
import { terminalLine } from './terminal-text.ts';

/** What the operating system's error codes mean, in words (Node's own messages put them in a stack dump). */
const REASONS: { [code: string]: string } = {
  ENOENT: 'no such file or directory',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EFBIG: 'file too large',
  EEXIST: 'already exists',
  ENOTEMPTY: 'directory not empty',
  ENAMETOOLONG: 'name too long',
  ELOOP: 'too many symbolic links',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files in the system',
  ENOMEM: 'out of memory',
  EIO: 'input/output error',
  EBUSY: 'resource busy',
  EXDEV: 'cannot move across file systems',
  EADDRINUSE: 'the port is in use (--port 0 picks a free one)',
  EADDRNOTAVAIL: 'the address is not available on this machine',
  ENOTFOUND: 'no such host',
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'timed out',
};

const VERBS: { [syscall: string]: string } = {
  open: 'open',
  read: 'read',
  write: 'write to',
  mkdir: 'create the directory',
  rmdir: 'remove',
  unlink: 'remove',
  rename: 'rename',
  scandir: 'list',
  stat: 'read',
  lstat: 'read',
  copyfile: 'copy',
  fsync: 'write to',
  listen: 'listen on',
  bind: 'listen on',
  connect: 'connect to',
  getaddrinfo: 'look up',
};

const MAX_MESSAGE = 600;

export interface Failure {
  /** One line, safe to print to a terminal, without the `error: ` prefix. */
  message: string;
  exitCode: number;
}

function isSystemError(err: unknown): err is NodeJS.ErrnoException & { address?: string; port?: number } {
  return (
    err instanceof Error &&
    typeof (err as NodeJS.ErrnoException).code === 'string' &&
    /^E[A-Z0-9]+$/.test((err as NodeJS.ErrnoException).code!)
  );
}

/** A system error as "cannot VERB WHAT: REASON (CODE)". */
function systemMessage(err: NodeJS.ErrnoException & { address?: string; port?: number; hostname?: string }): string {
  const code = err.code!;
  const reason = REASONS[code] ?? err.message.replace(new RegExp(`^${code}:\\s*`), '').split(',')[0]!;
  const verb = err.syscall ? (VERBS[err.syscall] ?? err.syscall) : undefined;
  const what =
    err.path ??
    (err.address !== undefined ? `${err.address}${err.port !== undefined ? `:${err.port}` : ''}` : undefined) ??
    err.hostname;
  if (verb && what) return `cannot ${verb} ${what}: ${reason} (${code})`;
  if (verb) return `cannot ${verb.replace(/ (to|on)$/, '')}: ${reason} (${code})`;
  return `${reason} (${code})`;
}

/**
 * The one mechanism by which the CLI turns any error into one line and an exit code: the library's
 * own errors carry their message (usage errors exit 2), operating-system errors (a missing file, a
 * read-only or full disk, a port in use) are put in words, and anything else is an internal error
 * whose stack is shown only with AGENT_R1_DEBUG=1. Never a stack trace by default.
 */
export function describeFailure(err: unknown): Failure {
  const one = (text: string) => {
    const line = terminalLine(text);
    return line.length > MAX_MESSAGE ? `${line.slice(0, MAX_MESSAGE)}…` : line;
  };
  if (err instanceof UsageError || err instanceof UnknownNameError)
    return { message: one(err.message), exitCode: EXIT_USAGE };
  if (err instanceof AgentR1Error) return { message: one(err.message), exitCode: EXIT_FAILED };
  if (isSystemError(err)) return { message: one(systemMessage(err)), exitCode: EXIT_FAILED };
  if (err instanceof Error && err.name === 'AbortError') return { message: 'interrupted', exitCode: EXIT_INTERRUPTED };
  const what = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return {
    message: one(`internal error: ${what} (AGENT_R1_DEBUG=1 shows where)`),
    exitCode: EXIT_FAILED,
  };
}

/** Prints the failure (and, with AGENT_R1_DEBUG=1, the stack) to stderr and exits with its code. */
export function exitWithFailure(err: unknown): never {
  const { message, exitCode } = describeFailure(err);
  process.stderr.write(`error: ${message}\n`);
  if (process.env.AGENT_R1_DEBUG && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
  process.exit(exitCode);
}
