import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { HfFolderError } from './errors.ts';

/** What a path that is not a regular file is, in words. */
function fileKind(st: { isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean }): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  return 'a device';
}

/**
 * A file of a model folder, read whole if it is a regular file of at most `maxBytes` (a folder is
 * untrusted: a 10 GB "config.json" is refused before it is read). Opened without blocking and
 * checked on the open descriptor: a FIFO or device named like a model file would otherwise block
 * the read forever. `null` when the file does not exist and may not.
 */
export async function readFolderFile(
  file: string,
  maxBytes: number,
  options: { optional?: boolean } = {},
): Promise<Buffer | null> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ENOTDIR: the folder is a file, so it holds no such file either.
    if ((code === 'ENOENT' || code === 'ENOTDIR') && options.optional) return null;
    throw new HfFolderError(file, null, code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? error})`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new HfFolderError(file, null, `is not a file (it is ${fileKind(st)})`);
    if (st.size > maxBytes)
      throw new HfFolderError(file, null, `${st.size} bytes; the most this build reads is ${maxBytes}`);
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}

/**
 * A JSON file of a model folder, size-bounded and a regular file (readFolderFile), as a plain
 * object. `null` when the file does not exist and may not. `beforeParse` sees the text first, to
 * refuse what would take too long to parse.
 */
export async function readJsonFile(
  file: string,
  maxBytes: number,
  options: { optional?: boolean; beforeParse?: (text: string) => void } = {},
): Promise<{ [key: string]: unknown } | null> {
  const bytes = await readFolderFile(file, maxBytes, options);
  if (bytes === null) return null;
  const text = bytes.toString('utf8');
  options.beforeParse?.(text);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new HfFolderError(file, null, `is not JSON: ${(error as Error).message}`);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new HfFolderError(file, null, 'is not a JSON object');
  return json as { [key: string]: unknown };
}
