import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A redis-server of a test's own: a free loopback port, a temp dir, gone when the test ends. */
export interface RedisServer {
  url: string;
  port: number;
  dir: string;
  /** Stops it gracefully (SIGTERM: with AOF on, everything written is on disk). */
  stop(): Promise<void>;
  /** Kills it (SIGKILL). */
  kill(): Promise<void>;
  /** Starts it again on the same port and dir (after stop or kill). */
  restart(): Promise<void>;
  /** Stops it and deletes its dir. */
  dispose(): Promise<void>;
}

const BINARY = process.env.AGENT_R1_REDIS_SERVER ?? 'redis-server';
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A port nobody listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function ping(port: number, password?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.setTimeout(500, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('connect', () => socket.write(password ? `AUTH ${password}\r\nPING\r\n` : 'PING\r\n'));
    socket.on('data', (d) => {
      reply += d.toString();
      if (reply.split('\r\n').length > (password ? 2 : 1)) {
        socket.end();
        resolve(reply.includes('+PONG'));
      }
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * Starts redis-server (Debian's package; bin/test-setup.js, npm test's first step, installs it) with nothing saved by snapshot and,
 * with `appendonly`, an append-only file (fsync every second, as in production); with `password`,
 * clients must authenticate (the URL holds no password: the test gives it as it sees fit).
 */
export async function startRedis(options: { appendonly?: boolean; password?: string } = {}): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'agent-r1-redis-'));
  let child: ChildProcess | undefined;
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.appendonly ? 'yes' : 'no',
    '--maxmemory-policy',
    'noeviction',
    '--logfile',
    join(dir, 'redis.log'),
    ...(options.password ? ['--requirepass', options.password] : []),
  ];
  const launch = async () => {
    const started = spawn(BINARY, args, { stdio: 'ignore' });
    const failed = new Promise<never>((_, reject) =>
      started.once('error', (err) =>
        reject(
          new Error(`cannot start ${BINARY} (${err.message}): install redis-server (apt-get install redis-server)`),
        ),
      ),
    );
    running.add(started);
    started.once('exit', () => running.delete(started));
    child = started;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (await Promise.race([ping(port, options.password), failed])) return;
      if (started.exitCode !== null) throw new Error(`redis-server exited with code ${started.exitCode} (see ${dir})`);
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const end = async (signal: NodeJS.Signals) => {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise((resolve) => current.once('exit', resolve));
    current.kill(signal);
    await exited;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    restart: launch,
    async dispose() {
      await end('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
