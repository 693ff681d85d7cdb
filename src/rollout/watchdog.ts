import { AgentR1Error } from '../core/errors.ts';

/**
 * A watchdog for a worker thread that runs scenario code: the thread says it is alive every
 * `heartbeatMs` (from a timer, so only while its event loop turns); silent for longer than the
 * deadline, it is stuck in code that never yields (a busy loop in a tool), which no timeout inside
 * it can stop, and its watcher terminates it.
 */

/** A worker thread whose event loop did not turn for too long while it ran scenario code: it was terminated. */
export class WorkerStalledError extends AgentR1Error {
  constructor(readonly ms: number) {
    super(
      `its worker thread was busy for over ${Number((ms / 1000).toFixed(1))} s without yielding (scenario code ` +
        'that never returns, e.g. a loop in a tool) and was terminated',
    );
  }
}

export interface ThreadWatch {
  /** How often the watched thread should say it is alive. */
  readonly heartbeatMs: number;
  /** Whether the thread was judged stuck (onStall was called). */
  readonly stalled: boolean;
  /** How long the thread may be silent (ms); may change as it moves to work of another kind. */
  stallMs: number;
  /** Call on every message from the thread: it is alive. Watching starts at the first. */
  heard(): void;
  stop(): void;
}

/**
 * Watches one thread: `onStall` is called once when it was silent for over `stallMs` after its first
 * word. A late tick means this thread was blocked itself (a long training step): the worker's
 * messages may be waiting unread, so that time is not counted as the worker's silence.
 */
export function watchThread(stallMs: number, onStall: () => void): ThreadWatch {
  // A heartbeat fits a quarter of the first deadline (a later one may only be longer).
  const heartbeatMs = Math.max(5, Math.min(1000, Math.floor(stallMs / 4)));
  let lastHeard: number | undefined;
  let lastTick = performance.now();
  let stalled = false;
  const timer = setInterval(() => {
    const now = performance.now();
    // Time this thread spent blocked past the tick is not the worker's silence.
    const blocked = Math.max(0, now - lastTick - heartbeatMs);
    lastTick = now;
    if (lastHeard === undefined || stalled) return;
    lastHeard += blocked;
    if (now - lastHeard > watch.stallMs) {
      stalled = true;
      onStall();
    }
  }, heartbeatMs);
  timer.unref();
  const watch: ThreadWatch = {
    heartbeatMs,
    stallMs,
    get stalled() {
      return stalled;
    },
    heard: () => void (lastHeard = performance.now()),
    stop: () => clearInterval(timer),
  };
  return watch;
}
