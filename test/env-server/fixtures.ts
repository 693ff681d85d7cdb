import WebSocket from 'ws';
import { calculator } from '../../scenarios/calculator/index.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { EnvServer, type EnvServerOptions } from '../../src/env-server/server.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { toyScenario } from '../helpers/toy-scenario.ts';

export const calc = calculator as Exclude<typeof calculator, (...args: never[]) => unknown> as Scenario;

/** The toy scenario (one tool per failure mode) with a fixed set of 3 tasks per split. */
export function toy(episode: Scenario['episode'] = {}): Scenario {
  return { ...toyScenario(episode), taskCount: () => 3 };
}

export interface Served {
  server: EnvServer;
  url: string;
  ws: string;
  records: EpisodeRecord[];
  /** Resolves once `n` records have been sealed. */
  recorded(n: number): Promise<EpisodeRecord[]>;
}

/** An environment server on a free loopback port, keeping its records in memory. */
export async function serve(options: Partial<EnvServerOptions> = {}): Promise<Served> {
  const records: EpisodeRecord[] = [];
  const waiters: Array<{ n: number; resolve: (r: EpisodeRecord[]) => void }> = [];
  const server = new EnvServer({
    scenario: toy(),
    ...options,
    onRecord: (r) => {
      records.push(r);
      options.onRecord?.(r);
      for (const w of waiters.filter((w) => records.length >= w.n)) w.resolve(records);
    },
  });
  const url = await server.listen(0, '127.0.0.1');
  return {
    server,
    url,
    ws: `${url.replace('http', 'ws')}/ws`,
    records,
    recorded: (n) =>
      records.length >= n ? Promise.resolve(records) : new Promise((resolve) => waiters.push({ n, resolve })),
  };
}

/** A bare WebSocket that sends raw text and reads messages in order (for protocol errors a client would not send). */
export async function rawSocket(url: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(url, { headers });
  const inbox: unknown[] = [];
  const waiting: Array<(m: unknown) => void> = [];
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as unknown;
    const w = waiting.shift();
    if (w) w(m);
    else inbox.push(m);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const next = () =>
    inbox.length > 0 ? Promise.resolve(inbox.shift()) : new Promise<unknown>((resolve) => waiting.push(resolve));
  return {
    ws,
    closed,
    next: next as () => Promise<{ type: string; data: Record<string, unknown> }>,
    /** Sends text as is and returns the next message. */
    ask: async (raw: string) => {
      ws.send(raw);
      return (await next()) as { type: string; data: Record<string, unknown> };
    },
  };
}
