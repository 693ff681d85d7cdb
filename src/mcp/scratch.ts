import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { FolderPathError } from './errors.ts';

/**
 * An episode's scratch folder: made fresh, given to its server, removed after. Its real path never
 * reaches a record: what the agent sees, and the results it gets back, name it by an alias
 * (`/workspace`), so two runs of an episode read the same whatever folder the system gave them.
 */

/**
 * Every thread's scratch folders live in one folder of this process, `agent-r1-mcp-<pid>` (threads
 * share the pid), removed when the process exits: a worker thread's exit handlers do not run when its
 * pool terminates it, and a folder made a moment before the exit is under it all the same.
 */
let root: string | undefined;

function processRoot(): string {
  const dir = join(realpathSync(tmpdir()), `agent-r1-mcp-${process.pid}`);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  // Another thread made it, or a crashed process of the same pid did; anyone else's is not used.
  const st = lstatSync(dir);
  const own = st.isDirectory() && (process.getuid === undefined || st.uid === process.getuid());
  return own ? dir : realpathSync(mkdtempSync(join(tmpdir(), 'agent-r1-mcp-')));
}

if (isMainThread)
  process.once('exit', () =>
    rmSync(join(realpathSync(tmpdir()), `agent-r1-mcp-${process.pid}`), { recursive: true, force: true }),
  );

export function makeScratch(): string {
  root ??= processRoot();
  // The real path: servers resolve symlinks (/tmp on macOS), and their messages name the real one.
  return mkdtempSync(join(root, 'episode-'));
}

export function removeScratch(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

/** Maps paths between the alias the agent uses and the real folder, both ways. */
export class PathAlias {
  constructor(
    readonly alias: string,
    readonly real: string,
  ) {}

  /** An argument path that starts with the alias, onto the real folder; anything else as it is. */
  toServer(path: string): string {
    if (path === this.alias) return this.real;
    return path.startsWith(`${this.alias}/`) ? this.real + path.slice(this.alias.length) : path;
  }

  /** Every mention of the real folder in a server's text, onto the alias. */
  fromServer(text: string): string {
    return text.includes(this.real) ? text.split(this.real).join(this.alias) : text;
  }
}

/** The argument names that hold paths: the alias is mapped in these only, never in contents. */
export const PATH_ARGUMENT = /(^|_)(path|paths|source|destination|dir|directory|root|file|folder)$/i;

/** The arguments with the alias mapped in path arguments (strings, and arrays of strings). */
export function argumentsToServer(args: { [key: string]: unknown }, alias: PathAlias): { [key: string]: unknown } {
  const out: { [key: string]: unknown } = {};
  for (const [key, value] of Object.entries(args)) {
    if (!PATH_ARGUMENT.test(key)) out[key] = value;
    else if (typeof value === 'string') out[key] = alias.toServer(value);
    else if (Array.isArray(value)) out[key] = value.map((v) => (typeof v === 'string' ? alias.toServer(v) : v));
    else out[key] = value;
  }
  return out;
}

/**
 * A folder's contents: each file's path (relative, `/`-separated) → its text, each folder's path
 * with a trailing `/` → ''. Files that are not UTF-8 text, or larger than `maxTextBytes`, are kept as
 * `sha256:` and their digest. Sorted by path.
 */
export type FolderContents = { [path: string]: string };

export async function readFolder(dir: string, maxTextBytes = 64 * 1024): Promise<FolderContents> {
  const out: FolderContents = {};
  const walk = async (rel: string) => {
    const entries = await readdir(rel === '' ? dir : join(dir, rel), { withFileTypes: true });
    for (const entry of entries) {
      const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        out[`${path}/`] = '';
        await walk(path);
      } else if (entry.isFile()) {
        // A file that was listed and is gone (a server's temporary file, renamed away) is not there.
        const bytes = await readFile(join(dir, path)).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined;
          throw err;
        });
        if (bytes === undefined) continue;
        const text = bytes.length <= maxTextBytes ? utf8(bytes) : undefined;
        out[path] = text ?? `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
      }
    }
  };
  await walk('');
  return sortedContents(out);
}

export function sortedContents(contents: FolderContents): FolderContents {
  const out: FolderContents = {};
  for (const key of Object.keys(contents).sort()) out[key] = contents[key]!;
  return out;
}

const decoder = new TextDecoder('utf-8', { fatal: true });
function utf8(bytes: Buffer): string | undefined {
  try {
    return decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/** What changed from `before` to `after`: changed or new paths with their contents, removed ones as null. */
export function folderChanges(before: FolderContents, after: FolderContents): { [path: string]: string | null } {
  const changes: { [path: string]: string | null } = {};
  for (const path of Object.keys(before)) if (!(path in after)) changes[path] = null;
  for (const [path, text] of Object.entries(after)) if (before[path] !== text) changes[path] = text;
  return sortedContents(changes as FolderContents) as { [path: string]: string | null };
}

export function applyChanges(contents: FolderContents, changes: { [path: string]: string | null }): FolderContents {
  const next: FolderContents = { ...contents };
  for (const [path, text] of Object.entries(changes)) {
    if (text === null) delete next[path];
    else next[path] = text;
  }
  return sortedContents(next);
}

/**
 * Writes a folder's contents (as readFolder gives them: files, and folders with a trailing `/`) into
 * `dir`. Every path must stay inside `dir`: the contents often come from a task, and in replay from a
 * record, which anyone can edit, so `../../home/me/.bashrc` or an absolute path is refused
 * (FolderPathError) before anything is written.
 */
export async function writeFolder(dir: string, contents: FolderContents): Promise<void> {
  const root = resolve(dir);
  const targets = Object.keys(contents).map((path) => {
    const target = resolve(root, path);
    const rel = relative(root, target);
    if (isAbsolute(path) || rel === '' || rel.startsWith('..') || isAbsolute(rel)) throw new FolderPathError(path);
    return { path, target };
  });
  for (const { path, target } of targets) {
    if (path.endsWith('/')) await mkdir(target, { recursive: true });
    else {
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, contents[path]!);
    }
  }
}
