/** Where `command` is found on `path` (a PATH value, default process.env.PATH), or null. */
export function findCommand(command: string, path?: string): string | null;
/** The Debian packages the tests need that this machine lacks (`slow`: the slow suite's too). */
export function missingPackages(options?: { slow?: boolean; path?: string }): string[];
/** What to do about missing packages: nothing, install (with `prefix` before apt-get), or stop with `message`. */
export function decide(options: {
  missing: readonly string[];
  root: boolean;
  sudo: boolean;
  aptGet: boolean;
  checkOnly: boolean;
}): { action: 'ready' } | { action: 'install'; prefix: string[] } | { action: 'stop'; message: string };
