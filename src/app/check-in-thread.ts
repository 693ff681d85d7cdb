import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { watchThread } from '../rollout/watchdog.ts';
import { workerEntryUrl } from '../rollout/worker-entry.ts';
import type { CheckOptions, CheckResult, Findings, ScenarioProblem } from './check-scenario.ts';

/**
 * `scenario check` with a watchdog: checkScenarioDir runs in a worker thread that says it is alive
 * while its event loop turns. Scenario code that never yields (a busy loop in a tool, the ToolEnv,
 * a policy or tasks()) stops it saying so, and no timeout inside that thread can fire; past the
 * deadline the thread is terminated and the part it was in is a `hang` problem. The deadline of a
 * policy's episodes is one episode's timeout; loading the module (compiling TypeScript, building a
 * world), tasks() and the world machine get `setupTimeoutMs` (SETUP_DEADLINE_MS by default). A policy that hung is left out and the
 * check runs again for the rest; a hang anywhere else ends the check with what it had found.
 */

/** The least time loading a scenario (a compile, a world built in its factory), tasks() and the world machine may hold the thread. */
export const SETUP_DEADLINE_MS = 60_000;

/** What the check thread is given (workers/check.ts). */
export interface CheckTask {
  dir: string;
  options: Omit<CheckOptions, 'onPhase'>;
  port: MessagePort;
  heartbeatMs: number;
}

/** What the check thread says: alive (its threadId), or where it is now and what it found so far. */
export type CheckMessage = { type: 'alive'; thread: number } | { type: 'phase'; where: string; found: Findings };

export type CheckFindings = Omit<CheckResult, 'scenario'>;

export async function checkScenarioDirInThread(dir: string, options: CheckOptions = {}): Promise<CheckFindings> {
  const episodeMs = options.episodeTimeoutMs ?? 10_000;
  const deadlines = { setup: Math.max(options.setupTimeoutMs ?? SETUP_DEADLINE_MS, episodeMs), episode: episodeMs };
  const skip = [...(options.skip ?? [])];
  const hangs: ScenarioProblem[] = [];
  for (;;) {
    const run = await runOnce(dir, { ...options, skip }, deadlines);
    if (!('stalledAt' in run)) return { ...run, problems: [...hangs, ...run.problems] };
    const where = run.stalledAt;
    hangs.push({
      kind: 'hang',
      where,
      message:
        `${describePart(where)} kept its thread busy for over ${deadlineOf(where, deadlines)} ms without yielding: scenario code ` +
        'that never returns (a loop in a tool, the ToolEnv, a policy or tasks()); the check stopped it there',
    });
    // A policy that hangs is left out, and the rest is checked; a hang elsewhere leaves nothing to go on with.
    if (!where.startsWith('policies.') || skip.includes(where)) {
      const found = run.found ?? { problems: [], warnings: [], checked: [], notChecked: [] };
      return { ...found, problems: [...hangs, ...found.problems] };
    }
    skip.push(where);
  }
}

/** Episodes (a policy's, a summarizer's fold) get an episode's timeout; setting up gets more. */
function deadlineOf(where: string, deadlines: { setup: number; episode: number }): number {
  return where.startsWith('policies.') || where === 'summarizer' ? deadlines.episode : deadlines.setup;
}

function describePart(where: string): string {
  if (where === 'load') return 'importing the scenario module';
  if (where.startsWith('policies.')) return `an episode of ${where}`;
  return where;
}

/** One run of the check in a fresh thread: its findings, or where it stalled (and what it had found before). */
async function runOnce(
  dir: string,
  options: CheckOptions,
  deadlines: { setup: number; episode: number },
): Promise<CheckFindings | { stalledAt: string; found?: Findings }> {
  const { onPhase: _ignored, ...plain } = options;
  const pool = new Piscina({
    filename: workerEntryUrl({ userScenario: true }),
    execArgv: [],
    minThreads: 1,
    maxThreads: 1,
    concurrentTasksPerWorker: 1,
  });
  pool.on('error', () => {});
  const { port1, port2 } = new MessageChannel();
  let thread: number | undefined;
  let where = 'load';
  let found: Findings | undefined;
  // The heartbeat is sized for the shorter deadline; the first part (loading) has the longer one.
  const watch = watchThread(deadlines.episode, () => pool.threads.find((w) => w.threadId === thread)?.terminate());
  watch.stallMs = deadlines.setup;
  port1.on('message', (m: CheckMessage) => {
    watch.heard();
    if (m.type === 'alive') thread = m.thread;
    else {
      where = m.where;
      watch.stallMs = deadlineOf(where, deadlines);
      found = m.found;
      options.onPhase?.(m.where, m.found);
    }
  });
  const task: CheckTask = { dir, options: plain, port: port2, heartbeatMs: watch.heartbeatMs };
  try {
    return (await pool.run(task, { name: 'check', transferList: [port2 as never] })) as CheckFindings;
  } catch (err) {
    if (watch.stalled) return { stalledAt: where, ...(found ? { found } : {}) };
    throw err;
  } finally {
    watch.stop();
    port1.close();
    await pool.destroy();
  }
}
