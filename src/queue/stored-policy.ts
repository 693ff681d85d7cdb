import { cp, rm } from 'node:fs/promises';
import type { PolicyOutput } from '../core/types.ts';
import { AgentR1Error } from '../core/errors.ts';
import type { BatchPolicy } from '../policy/policy.ts';
import type { CheckpointablePolicy } from '../rollout/worker-threads.ts';

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

  async saveCheckpoint(dir: string): Promise<string> {
    await rm(dir, { recursive: true, force: true });
    await cp(this.dir, dir, { recursive: true });
    return this.weights;
  }

  act(): Promise<PolicyOutput> {
    return Promise.reject(new AgentR1Error(`policy ${this.id} is played by copies in worker threads only`));
  }

  actBatch(): Promise<PolicyOutput[]> {
    return this.act().then(() => []);
  }
}
