import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliArgs, repoRoot } from './cli.ts';

/** An `agent-r1 worker` process of a test's own; its stderr (the status lines) goes to a file. */
export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  /** What it printed so far. */
  log(): string;
  /** Sends a signal and waits for the exit: its code (null when killed by the signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export function spawnWorker(url: string, name: string, args: string[] = []): WorkerProcess {
  const logFile = join(mkdtempSync(join(tmpdir(), 'agent-r1-worker-')), 'stderr.log');
  const fd = openSync(logFile, 'w');
  const child = spawn(
    process.execPath,
    cliArgs(['worker', '--queue', url, '--name', name, '--threads', '1', '--concurrency', '1', ...args]),
    { cwd: repoRoot, stdio: ['ignore', 'ignore', fd] },
  );
  closeSync(fd);
  running.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  return {
    name,
    child,
    log: () => readFileSync(logFile, 'utf8'),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Waits until `check` holds (polling), or fails after `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 60_000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The CLI in a child process that the test does not wait on (a coordinator to kill, say). */
export function spawnCli(args: string[]) {
  const child = spawn(process.execPath, cliArgs(args), { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => {
    stdout += d;
  });
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
    (resolve) =>
      // 'close': the process has exited and its pipes are drained.
      child.once('close', (code, signal) => {
        running.delete(child);
        resolve({ code, signal, stdout, stderr });
      }),
  );
  return { child, done, stderr: () => stderr };
}
