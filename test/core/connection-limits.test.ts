import test, { type ExecutionContext } from 'ava';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import type { ConnectionLimits } from '../../src/core/http.ts';
import { EnvServer } from '../../src/env-server/server.ts';
import { ChatServer } from '../../src/openai/server.ts';
import { startViewer } from '../../src/view/server.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { calc } from '../env-server/fixtures.ts';
import { calculatorCheckpoint } from '../openai/fixtures.ts';

// No client can hold a server: idle connections, a request trickled byte by byte, and connections
// past the cap are closed, and the next client is served. The same for `serve`, `env serve` and `view`.

// Deadlines of seconds: on a loaded machine (the whole suite at once) opening four connections can
// take most of one, and the idle one must still be open when the fourth arrives.
const LIMITS: ConnectionLimits = { maxConnections: 3, headersTimeoutMs: 3000, requestTimeoutMs: 4000 };

interface Opened {
  socket: Socket;
  /** Milliseconds from open to close, and when it closed. */
  closed: Promise<{ ms: number; at: number }>;
  received: () => string;
}

function open(port: number): Promise<Opened> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    let text = '';
    const socket = connect(port, '127.0.0.1');
    const closed = new Promise<{ ms: number; at: number }>((done) =>
      socket.on('close', () => done({ ms: Date.now() - t0, at: Date.now() })),
    );
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', () => {});
    socket.on('connect', () => resolve({ socket, closed, received: () => text }));
  });
}

async function probe(t: ExecutionContext, base: string, trickle: string, served: string): Promise<void> {
  t.timeout(60_000);
  const port = Number(new URL(base).port);
  const [idle, slow] = await Promise.all([open(port), open(port)]);
  slow.socket.write(trickle);
  const drip = setInterval(() => slow.socket.write(trickle.startsWith('POST') ? ' ' : 'X-Drip: 1\r\n'), 100);
  const third = await open(port);
  const fourth = await open(port);
  try {
    // Past the cap a connection is closed when accepted, long before the idle one's deadline.
    const [past, idleClosed] = await Promise.all([fourth.closed, idle.closed]);
    t.true(past.at < idleClosed.at, 'a connection past the cap is closed at once');
    t.true(idleClosed.ms >= 2900 && idleClosed.ms < 20_000, `an idle connection closed after ${idleClosed.ms} ms`);
    const slowMs = (await slow.closed).ms;
    t.true(slowMs < 20_000, `a trickled request ended after ${slowMs} ms`);
    t.regex(slow.received(), /^HTTP\/1\.1 408 /, 'answered 408 Request Timeout');
    third.socket.destroy();
    const answer = await fetch(new URL(served, base));
    t.true(answer.status < 500, `then a client is served (${answer.status})`);
  } finally {
    clearInterval(drip);
    for (const c of [idle, slow, third, fourth]) c.socket.destroy();
  }
}

const post = (path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{`;

test('serve: idle and trickling clients and connections past the cap are closed; the next is served', async (t) => {
  const policy = (await loadCheckpointPolicy((await calculatorCheckpoint()).dir)) as unknown as ServablePolicy;
  const server = new ChatServer({ policy, modelName: 'm', limits: LIMITS });
  const url = await server.listen(0, '127.0.0.1');
  try {
    await probe(t, url.replace(/\/v1$/, ''), post('/v1/chat/completions'), '/v1/models');
  } finally {
    await server.close();
  }
});

test('env serve: idle and trickling clients and connections past the cap are closed; the next is served', async (t) => {
  const server = new EnvServer({ scenario: calc, limits: LIMITS });
  const url = await server.listen(0, '127.0.0.1');
  try {
    await probe(t, url, post('/reset'), '/health');
  } finally {
    await server.close();
  }
});

test('view: idle clients, headers trickled line by line and connections past the cap are closed; the next is served', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-limits-'));
  writeFileSync(join(dir, 'summary.json'), '{}\n');
  const viewer = await startViewer({ dirs: [dir], scenarios: builtinScenarios, limits: LIMITS });
  try {
    await probe(t, viewer.url, 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n', '/');
  } finally {
    await viewer.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
