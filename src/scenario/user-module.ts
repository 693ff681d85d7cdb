import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ScenarioError } from '../core/errors.ts';

/** What a scenario folder's module may be called: its TypeScript source, or that compiled. */
export const SCENARIO_ENTRIES = ['index.ts', 'index.mts', 'index.js', 'index.mjs'] as const;

/** The module file of a user's scenario folder, if it has one. */
export function scenarioEntry(dir: string): string | undefined {
  return SCENARIO_ENTRIES.map((name) => join(dir, name)).find((file) => existsSync(file));
}

/** tsx, this package's own dependency, cannot be loaded (an install that left it out). */
export class TsLoaderMissingError extends ScenarioError {
  constructor(
    readonly file: string,
    options?: ErrorOptions,
  ) {
    super(
      `${file} needs a TypeScript loader, and tsx (a dependency of agent-r1-ts) cannot be loaded: reinstall agent-r1-ts (or compile the module to plain JavaScript)`,
      options,
    );
  }
}

let tsLoader: Promise<void> | undefined;

/**
 * Registers tsx in this thread, as `node --import tsx` does: its ES module hooks and its require
 * hooks both, since a module in a folder whose package.json has no `"type": "module"` (what `npm init
 * -y` writes) is CommonJS to Node, and its `import`/`export` syntax is compiled for require.
 */
async function registerTsx(): Promise<void> {
  const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
  esm.register();
  cjs.register();
}

/**
 * Whether Node's own import failed where tsx loads: TypeScript, `import` syntax in a folder Node
 * takes for CommonJS (a Node without syntax detection), or a relative import without its extension,
 * which TypeScript users write and Node's ES modules refuse.
 */
function needsTsx(err: unknown): boolean {
  const e = err as NodeJS.ErrnoException;
  if (
    e?.code === 'ERR_UNKNOWN_FILE_EXTENSION' ||
    e?.code === 'ERR_MODULE_NOT_FOUND' ||
    e?.code === 'ERR_UNSUPPORTED_DIR_IMPORT'
  )
    return true;
  return (
    err instanceof SyntaxError &&
    /Cannot use import statement outside a module|Unexpected token 'export'|Cannot use 'import\.meta' outside a module/.test(
      err.message,
    )
  );
}

/**
 * A module compiled to CommonJS (tsx's output in a CommonJS-typed folder) comes to `import` as
 * `{ default: module.exports }`; its exports, `default` among them, are those of module.exports.
 */
function esModuleExports(ns: Record<string, unknown>): Record<string, unknown> {
  const exported = ns.default as { __esModule?: unknown } | null | undefined;
  return exported && typeof exported === 'object' && exported.__esModule === true
    ? (exported as Record<string, unknown>)
    : ns;
}

/** `"type"` of the package.json nearest the file (Node's rule: none, or none found, is CommonJS). */
function packageType(file: string): string {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        return String((JSON.parse(readFileSync(manifest, 'utf8')) as { type?: unknown }).type ?? 'commonjs');
      } catch {
        return 'commonjs'; // Node's own import reports a broken package.json
      }
    }
    if (dirname(dir) === dir) return 'commonjs';
  }
}

/** Whether a TypeScript loader (tsx, run with `--import tsx`) already has require's hooks in this thread. */
const tsLoaderActive = () => createRequire(import.meta.url).extensions['.ts'] !== undefined;

/**
 * Whether Node's own import cannot load the file as the user wrote it: TypeScript, or a `.js` file
 * in a CommonJS-typed folder, which may hold `import`/`export` (Node 20.12 refuses it, later ones
 * re-parse it with a warning on stderr; tsx compiles it, a CommonJS one as well).
 */
function wantsTsx(file: string): boolean {
  return /\.[cm]?tsx?$/.test(file) || (/\.js$/.test(file) && packageType(file) !== 'module');
}

/**
 * Imports a user's module (a scenario's or an agent's), as the user wrote it: `.ts` or `.js`, ES module
 * syntax in any folder, with or without `"type": "module"`. Where Node loads it (compiled JavaScript
 * in an ES module package, or anything when running from the sources through tsx) it is a plain
 * import; otherwise tsx is registered, in this thread, on first need: the compiled package runs
 * without a loader, and only such a module pays for one. tsx's registration is global, not a
 * namespaced `tsImport`, which would load a second copy of every package the module imports
 * (agent-r1-ts itself, for a scenario: two of every class).
 */
export async function importUserModule(file: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(file).href;
  if (tsLoader === undefined && wantsTsx(file) && !tsLoaderActive()) await registerTsxFor(file);
  try {
    return esModuleExports((await import(url)) as Record<string, unknown>);
  } catch (err) {
    if (!needsTsx(err)) throw err;
  }
  await registerTsxFor(file);
  // A failed import stays failed for its URL: the query makes it a new one.
  return esModuleExports((await import(`${url}?ts`)) as Record<string, unknown>);
}

async function registerTsxFor(file: string): Promise<void> {
  tsLoader ??= registerTsx();
  try {
    await tsLoader;
  } catch (err) {
    throw new TsLoaderMissingError(file, { cause: err });
  }
}
