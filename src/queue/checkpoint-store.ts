import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { AgentR1Error } from '../core/errors.ts';
import { checkpointKeys, RUN_TTL_S } from './keys.ts';

/** A checkpoint a worker needs that the queue's store does not hold (expired, or never put). */
export class MissingCheckpointError extends AgentR1Error {
  constructor(readonly weights: string) {
    super(`checkpoint ${weights.slice(0, 12)} is not in the queue's store`);
  }
}

// Drops a run's claim on a checkpoint; the last claim gone, the checkpoint goes too.
const RELEASE = `
redis.call('SREM', KEYS[2], ARGV[1])
if redis.call('SCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) return 1 end
return 0`;

/**
 * Checkpoints on Redis by the content hash of their weights: the coordinator puts a checkpoint's
 * files once (a hash of file name → bytes) with a claim per run that uses it; workers fetch it once
 * and keep it in a disk cache. A checkpoint is deleted when its last run releases it, and expires
 * if a coordinator dies without doing so.
 */
export class CheckpointStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** Stores the checkpoint in `dir` (saved with weights `weights`) for `run`, uploading it only if absent. */
  async put(dir: string, weights: string, run: string): Promise<void> {
    const keys = checkpointKeys(this.prefix, weights);
    // The claim comes first, so a release by another run cannot delete the files between the check and the use.
    await this.redis.multi().sadd(keys.runs, run).expire(keys.runs, RUN_TTL_S).exec();
    if ((await this.redis.exists(keys.files)) === 0) {
      const files: { [name: string]: Buffer } = {};
      for (const name of await readdir(dir)) {
        if ((await stat(join(dir, name))).isFile()) files[name] = await readFile(join(dir, name));
      }
      await this.redis.multi().hset(keys.files, files).expire(keys.files, RUN_TTL_S).exec();
    } else {
      await this.redis.expire(keys.files, RUN_TTL_S);
    }
  }

  async has(weights: string): Promise<boolean> {
    return (await this.redis.exists(checkpointKeys(this.prefix, weights).files)) === 1;
  }

  async release(weights: string, run: string): Promise<void> {
    const keys = checkpointKeys(this.prefix, weights);
    await this.redis.eval(RELEASE, 2, keys.files, keys.runs, run);
  }

  /** The files of a checkpoint, or a MissingCheckpointError. */
  async files(weights: string): Promise<{ [name: string]: Buffer }> {
    const files = await this.redis.hgetallBuffer(checkpointKeys(this.prefix, weights).files);
    if (Object.keys(files).length === 0) throw new MissingCheckpointError(weights);
    return files;
  }
}

/**
 * A worker's disk cache of checkpoints, one folder per weights hash, fetched from the store on first
 * use. The `keep` most recently used stay (a trainer makes a new checkpoint every step).
 */
export class CheckpointCache {
  private readonly fetching = new Map<string, Promise<string>>();

  constructor(
    private readonly store: CheckpointStore,
    readonly dir: string,
    private readonly keep = 8,
  ) {}

  /** The folder holding the checkpoint, fetched if this machine does not have it yet. */
  get(weights: string): Promise<string> {
    let pending = this.fetching.get(weights);
    if (!pending) {
      pending = this.load(weights).finally(() => this.fetching.delete(weights));
      this.fetching.set(weights, pending);
    }
    return pending;
  }

  /** Whether the checkpoint is on disk here (no fetch). */
  has(weights: string): boolean {
    return existsSync(join(this.dir, weights, 'model.json'));
  }

  private async load(weights: string): Promise<string> {
    const target = join(this.dir, weights);
    if (this.has(weights)) {
      const now = new Date();
      await utimes(target, now, now);
      return target;
    }
    const files = await this.store.files(weights);
    await mkdir(this.dir, { recursive: true });
    // Written aside and renamed: another worker process on this machine never sees half a checkpoint.
    const tmp = join(this.dir, `.${weights}.${randomUUID()}`);
    await mkdir(tmp);
    for (const [name, bytes] of Object.entries(files)) {
      if (name.includes('/') || name.startsWith('.')) continue;
      await writeFile(join(tmp, name), bytes);
    }
    try {
      await rename(tmp, target);
    } catch {
      // Another process got there first.
      await rm(tmp, { recursive: true, force: true });
    }
    await this.prune(weights);
    return target;
  }

  private async prune(current: string): Promise<void> {
    const entries = await readdir(this.dir, { withFileTypes: true });
    const dirs = await Promise.all(
      entries
        .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== current)
        .map(async (e) => ({ name: e.name, mtime: (await stat(join(this.dir, e.name))).mtimeMs })),
    );
    dirs.sort((a, b) => b.mtime - a.mtime);
    for (const old of dirs.slice(Math.max(0, this.keep - 1))) {
      await rm(join(this.dir, old.name), { recursive: true, force: true });
    }
  }
}
