import { createServer } from 'node:net';
import test from 'ava';
import { cli } from '../helpers/cli.ts';

test.serial(
  'agent-r1 env serve: a network host without a key exits 2, a port in use exits 1, each with a one-line reason',
  async (t) => {
    const open = cli(['env', 'serve', '--scenario', 'calculator', '--host', '0.0.0.0']);
    t.is(open.code, 2);
    t.regex(open.stderr, /--host 0\.0\.0\.0 faces a network: give --api-key/);

    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const busy = cli(['env', 'serve', '--scenario', 'calculator', '--port', String(port), '--no-record']);
      t.is(busy.code, 1);
      t.regex(busy.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: port ${port} is in use`));
    } finally {
      taken.close();
    }
  },
);
