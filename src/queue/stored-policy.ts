import { existsSync } from 'node:fs';
import { cp, readFile, rename, rm } from 'node:fs/promises';
import type { PolicyOutput } from '../core/types.ts';
import { AgentR1Error } from '../core/errors.ts';
import type { BatchPolicy } from '../policy/policy.ts';
import type { CheckpointablePolicy } from '../rollout/worker-threads.ts';

/** Copies in progress, by target folder: jobs that start together must not copy over each other. */
const copying = new Map<string, Promise<void>>();

/**
 * A checkpoint policy known by its files on disk, for an executor that plays it on copies in its
 * threads (workerThreads with policyCopies): the queue worker's main thread never loads the model,
 * so it stays free to renew its job locks. Asked to act itself, it refuses.
 */
export class StoredCheckpointPolicy implements CheckpointablePolicy, BatchPolicy {
  constructor(
    readonly id: string,
    readonly version: string,
    readonly sampling: object,
    private readonly dir: string,
    private readonly weights: string,
  ) {}

  /** Copies the checkpoint to `dir` (unless it holds these files already); one copy at a time per folder. */
  async saveCheckpoint(dir: string): Promise<string> {
    const before = copying.get(dir) ?? Promise.resolve();
    const mine = before.catch(() => {}).then(() => this.copyTo(dir));
    copying.set(dir, mine);
    try {
      await mine;
    } finally {
      if (copying.get(dir) === mine) copying.delete(dir);
    }
    return this.weights;
  }

  private async copyTo(dir: string): Promise<void> {
    const manifest = (folder: string) => readFile(`${folder}/model.json`, 'utf8').catch(() => '');
    if (existsSync(dir) && (await manifest(dir)) === (await manifest(this.dir))) return;
    // Aside, then renamed: threads loading the folder never see half a checkpoint.
    const tmp = `${dir}.${process.pid}.tmp`;
    await rm(tmp, { recursive: true, force: true });
    await cp(this.dir, tmp, { recursive: true });
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  }

  act(): Promise<PolicyOutput> {
    return Promise.reject(new AgentR1Error(`policy ${this.id} is played by copies in worker threads only`));
  }

  actBatch(): Promise<PolicyOutput[]> {
    return this.act().then(() => []);
  }
}
