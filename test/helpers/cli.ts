import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** Node arguments that run TypeScript sources (no build needed: what is tested is what was just edited). */
export const SOURCE_ARGS = ['--import=tsx', '--conditions=source'];

/**
 * How the tests run the real CLI (bin/agent-r1.js): on the sources, unless AGENT_R1_TEST_CLI=dist —
 * `npm test` builds dist/ and sets it, so each spawned CLI starts compiled, in half the CPU time
 * (test/build checks that the compiled package gives the sources' records).
 */
const CLI_ARGS = process.env.AGENT_R1_TEST_CLI === 'dist' ? [] : SOURCE_ARGS;
export const cliArgs = (args: string[]): string[] => [...CLI_ARGS, `${repoRoot}/bin/agent-r1.js`, ...args];

/**
 * Runs the real CLI (bin/agent-r1.js) in a child process. spawnSync blocks the test process, so a
 * test that calls this (or paperTable) is declared with test.serial: ava then times it alone, where
 * concurrent tests would wait on each other's children and each report the sum.
 */
export function cli(
  args: string[],
  options: { cwd?: string; timeout?: number; env?: { [name: string]: string } } = {},
) {
  const result = spawnSync(process.execPath, cliArgs(args), {
    cwd: options.cwd ?? repoRoot,
    ...(options.env ? { env: { ...process.env, ...options.env } } : {}),
    encoding: 'utf8',
    timeout: options.timeout ?? 120_000,
  });
  return {
    code: result.status,
    stdout: result.stdout,
    stderr: result.stderr,
    lastJson: () => JSON.parse(result.stdout.trim().split('\n').at(-1)!),
  };
}

/** Runs bench/paper-table.ts in a child process. */
export function paperTable(args: string[], options: { timeout?: number } = {}) {
  const argv = [...SOURCE_ARGS, `${repoRoot}/bench/paper-table.ts`, ...args];
  const timeout = options.timeout ?? 60_000;
  const result = spawnSync(process.execPath, argv, { cwd: repoRoot, encoding: 'utf8', timeout });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
