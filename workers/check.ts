import { threadId } from 'node:worker_threads';
import type { CheckFindings, CheckMessage, CheckTask } from '../src/app/check-in-thread.ts';
import { checkScenarioDir } from '../src/app/check-scenario.ts';

/**
 * A Piscina task: `scenario check` of a folder, in this thread, under the watchdog of the thread that
 * asked (src/app/check-in-thread.ts): this thread says it is alive from a timer, so only while its
 * event loop turns, and says where the check is before each part that runs scenario code.
 */
export default async function runCheck(task: CheckTask): Promise<CheckFindings> {
  const say = (message: CheckMessage) => task.port.postMessage(message);
  const alive: CheckMessage = { type: 'alive', thread: threadId };
  say(alive);
  const heartbeat = setInterval(() => say(alive), task.heartbeatMs);
  try {
    const { scenario: _s, ...findings } = await checkScenarioDir(task.dir, {
      ...task.options,
      onPhase: (where, found) => say({ type: 'phase', where, found }),
    });
    return findings;
  } finally {
    clearInterval(heartbeat);
    task.port.close();
  }
}
