/** The most episodes of a scripted policy in one worker task. */
const SCRIPTED_CHUNK = 256;

/**
 * How a run's episodes are split into worker tasks, in plan order. A model policy's episodes go in
 * one chunk per worker (its rows batch together); scripted ones in smaller chunks, about four per
 * worker, so a slow chunk does not hold back the rest, and no bigger than SCRIPTED_CHUNK: records are
 * handed on in episode order, so those of later chunks wait for the earliest unfinished one, and
 * fewer, smaller chunks in flight keep fewer of them waiting.
 */
export function taskChunks<T>(items: readonly T[], workers: number, policy: 'scripted' | 'model'): T[][] {
  const size =
    policy === 'scripted'
      ? Math.min(SCRIPTED_CHUNK, Math.max(1, Math.ceil(items.length / (workers * 4))))
      : Math.max(1, Math.ceil(items.length / workers));
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}
