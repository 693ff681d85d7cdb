/**
 * The Chromium that the browser tests drive, with no set-up beyond `npm install`:
 *
 * 1. `$AGENT_R1_CHROMIUM`, when set: any Chromium on the machine (e.g. Debian's /usr/bin/chromium);
 * 2. otherwise the headless Chromium that the devDependency @sparticuz/chromium ships inside its npm
 *    tarball (bin/chromium.br, brotli-compressed), unpacked once per package version into the temp
 *    folder and reused by later runs.
 *
 * The package's own executablePath() is not used: it returns whatever `$TMPDIR/chromium` holds, of
 * any version, and two processes unpacking at once would see each other's half-written file. Here a
 * process unpacks into a private file and renames it into place, so a path, once there, is complete.
 */
import {
  chmodSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createBrotliDecompress } from 'node:zlib';

/** Flags for headless Chromium as root on a machine with no network but loopback. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The package folder of @sparticuz/chromium (its exports hide package.json, so go from its main file). */
function sparticuzDir(): string {
  const main = createRequire(import.meta.url).resolve('@sparticuz/chromium');
  let dir = dirname(main);
  while (
    !existsSync(join(dir, 'package.json')) ||
    JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name !== '@sparticuz/chromium'
  ) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the @sparticuz/chromium package folder from ${main}`);
    dir = up;
  }
  return dir;
}

/** The path of a Chromium executable, unpacking the npm-shipped one on first use. */
export async function chromiumExecutable(): Promise<string> {
  const override = process.env.AGENT_R1_CHROMIUM;
  if (override) {
    if (!existsSync(override)) throw new Error(`AGENT_R1_CHROMIUM=${override}: no such file`);
    return override;
  }
  const pkg = sparticuzDir();
  const { version } = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string };
  const dir = join(tmpdir(), `agent-r1-chromium-${version}`);
  const exe = join(dir, 'chromium');
  if (existsSync(exe)) return exe;
  mkdirSync(dir, { recursive: true });
  const partial = `${exe}.${process.pid}.partial`;
  try {
    await pipeline(
      createReadStream(join(pkg, 'bin', 'chromium.br')),
      createBrotliDecompress(),
      createWriteStream(partial),
    );
    chmodSync(partial, 0o755);
    renameSync(partial, exe);
  } finally {
    rmSync(partial, { force: true });
  }
  return exe;
}
