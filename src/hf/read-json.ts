import { readFile, stat } from 'node:fs/promises';
import { HfFolderError } from './errors.ts';

/**
 * A JSON file of a model folder, size-bounded (a folder is untrusted: a 10 GB "config.json" is
 * refused before it is read), as a plain object. `null` when the file does not exist and may not.
 * `beforeParse` sees the text first, to refuse what would take too long to parse.
 */
export async function readJsonFile(
  file: string,
  maxBytes: number,
  options: { optional?: boolean; beforeParse?: (text: string) => void } = {},
): Promise<{ [key: string]: unknown } | null> {
  let size: number;
  try {
    const st = await stat(file);
    if (!st.isFile()) throw new HfFolderError(file, null, 'is not a file');
    size = st.size;
  } catch (error) {
    if (error instanceof HfFolderError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options.optional) return null;
    throw new HfFolderError(file, null, code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? error})`);
  }
  if (size > maxBytes) throw new HfFolderError(file, null, `${size} bytes; the most this build reads is ${maxBytes}`);
  const text = await readFile(file, 'utf8');
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
