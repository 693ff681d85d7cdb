import { spawnSync } from 'node:child_process';

// Running commands as a user would in their own shell, for the tests that install the package
// into a project outside the repository (the *.slow.test.ts of scenario init and of the docs).

/**
 * The environment of a user's shell: without the npm_* variables of the `npm run`/`npx` that started
 * the tests (npm_config_local_prefix would make npx run this checkout's agent-r1, not the project's).
 * Install scripts are skipped: none is needed here, and offline better-sqlite3 (for support-desk)
 * would compile from source.
 */
export const userEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_'))),
  npm_config_ignore_scripts: 'true',
};

export function run(command: string, args: string[], cwd: string, timeout = 120_000) {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', timeout, env: userEnv });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, all: `${r.stdout}\n${r.stderr}` };
}

/** npm install, from npm's cache first (everything needed is among this package's own dependencies). */
export const npmInstall = (cwd: string) =>
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], cwd, 15 * 60_000);
