import { importOptional } from '../core/optional-import.ts';

/** What needs BullMQ and ioredis (optional dependencies: nothing but the queue uses them), as the messages say. */
const NEEDED_BY = 'the job queue (agent-r1 worker, --queue)';

/** The parts of BullMQ and ioredis the queue uses. */
export interface QueueLibraries {
  bullmq: Pick<typeof import('bullmq'), 'Job' | 'Queue' | 'UnrecoverableError' | 'WaitingError' | 'Worker'>;
  ioredis: Pick<typeof import('ioredis'), 'Redis'>;
}

// BullMQ first: it depends on ioredis, so the one install its message gives brings both.
async function load(): Promise<QueueLibraries> {
  const bullmq = await importOptional('bullmq', NEEDED_BY, () => import('bullmq'));
  const ioredis = await importOptional('ioredis', NEEDED_BY, () => import('ioredis'));
  return { bullmq, ioredis };
}

let loaded: Promise<QueueLibraries> | undefined;

/** BullMQ and ioredis, loaded on first use (again after a failure: a package installed meanwhile is found). */
export function queueLibraries(): Promise<QueueLibraries> {
  const pending = (loaded ??= load());
  pending.catch(() => {
    if (loaded === pending) loaded = undefined;
  });
  return pending;
}
