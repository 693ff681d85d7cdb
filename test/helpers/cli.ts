import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs the real CLI (bin/agent-r1.js) in a child process. spawnSync blocks the test process, so a
 * test that calls this (or paperTable) is declared with test.serial: ava then times it alone, where
 * concurrent tests would wait on each other's children and each report the sum.
 */
export function cli(args: string[], options: { cwd?: string; timeout?: number } = {}) {
  const result = spawnSync(process.execPath, [`${repoRoot}/bin/agent-r1.js`, ...args], {
    cwd: options.cwd ?? repoRoot,
    encoding: 'utf8',
    timeout: options.timeout ?? 120_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr, lastJson: () => JSON.parse(result.stdout.trim().split('\n').at(-1)!) };
}

/** Runs bench/paper-table.ts in a child process. */
export function paperTable(args: string[], options: { timeout?: number } = {}) {
  const result = spawnSync(process.execPath, ['--import=tsx', `${repoRoot}/bench/paper-table.ts`, ...args], { cwd: repoRoot, encoding: 'utf8', timeout: options.timeout ?? 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
