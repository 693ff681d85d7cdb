import { createRequire } from 'node:module';
import { AgentR1Error } from './errors.ts';

/**
 * A package that one scenario, backend or command needs and that is not installed: one of the
 * package's optionalDependencies, left out by `npm i agent-r1-ts --omit=optional` (or a failed
 * install of it). The message names the package, what needs it, and the command that installs it.
 */
export class MissingOptionalDependencyError extends AgentR1Error {
  /** `npm i <package>@<the range agent-r1-ts asks for>`. */
  readonly installCommand: string;

  constructor(
    readonly packageName: string,
    readonly neededBy: string,
    options?: ErrorOptions,
  ) {
    const install = `npm i ${installSpec(packageName)}`;
    super(`${neededBy} needs the optional package ${packageName}: ${install}`, options);
    this.installCommand = install;
  }
}

/**
 * Runs `load` (an `import()`, a `require` or a `require.resolve` of `packageName` or of a module that
 * imports it) and turns "that package is not installed" into a MissingOptionalDependencyError naming
 * `neededBy` (what the user ran: "the support-desk scenario", "the job queue (agent-r1 worker, --queue)").
 * Any other failure, a broken install of the package included, is passed on as it is.
 */
export function importOptional<T>(packageName: string, neededBy: string, load: () => T): T {
  const missing = (err: unknown): unknown =>
    notInstalled(err, packageName) ? new MissingOptionalDependencyError(packageName, neededBy, { cause: err }) : err;
  let loaded: T;
  try {
    loaded = load();
  } catch (err) {
    throw missing(err);
  }
  if (loaded instanceof Promise) {
    return loaded.catch((err: unknown) => {
      throw missing(err);
    }) as T;
  }
  return loaded;
}

/** Whether `err` is Node's "cannot find" for `packageName` itself (ESM: "package 'x'", CJS: "module 'x/…'"). */
function notInstalled(err: unknown, packageName: string): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  const quoted = packageName.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  return new RegExp(`Cannot find (package|module) '${quoted}(/[^']*)?'`).test((err as Error).message);
}

/** The package with the version range agent-r1-ts's package.json gives it (quoted when a shell would mind). */
function installSpec(packageName: string): string {
  let range: string | undefined;
  try {
    const pkg = createRequire(import.meta.url)('agent-r1-ts/package.json') as {
      optionalDependencies?: { [name: string]: string };
    };
    range = pkg.optionalDependencies?.[packageName];
  } catch {
    // Not resolvable (a copy of the module outside the package): the bare name still installs it.
  }
  if (!range) return packageName;
  const spec = `${packageName}@${range}`;
  return /^[\w@./:=-]+$/.test(spec) ? spec : `"${spec}"`;
}
