/**
 * Builds the bundle that bench/gpu-check.sh runs on a GPU machine without internet, where only the
 * repository and a small archive can be brought (no node_modules, no npm install):
 *
 *   npx tsx --conditions=source bench/gpu-bundle.ts [--out .tmp/gpu-bundle] [--with-node]
 *
 * Writes DIR/ and DIR.tar.xz holding: train.mjs and generate.mjs (bench/train.ts and
 * bench/generate.ts with every JavaScript dependency inlined by esbuild), tfjs-backend-wasm's .wasm
 * files beside them (the wasm backend loads them from its own directory), node_modules/webgpu
 * with Dawn for linux-x64 only (dawn.node, loaded by path, cannot be inlined), and with
 * --with-node this machine's node binary (for a machine without Node.js ≥ 20.12). Prints the sizes.
 * The tfjs-node bindings are left out: they are hundreds of MB of libtensorflow (gpu-check.sh uses
 * them only from a full install).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const { values: args } = parseArgs({
  options: {
    out: { type: 'string', default: '.tmp/gpu-bundle' },
    'with-node': { type: 'boolean', default: false },
  },
});
const out = resolve(args.out!);
const require = createRequire(import.meta.url);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

// Inside an ES module bundle, CommonJS dependencies still ask for require, __dirname, __filename.
const banner = [
  "import { createRequire as __bundleRequire } from 'node:module';",
  "import { fileURLToPath as __bundlePath } from 'node:url';",
  "import { dirname as __bundleDir } from 'node:path';",
  'const require = __bundleRequire(import.meta.url);',
  'const __filename = __bundlePath(import.meta.url);',
  'const __dirname = __bundleDir(__filename);',
].join(' ');

await build({
  entryPoints: { train: 'bench/train.ts', generate: 'bench/generate.ts' },
  outdir: out,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['source'],
  // Loaded by dynamic import when present: Dawn ships a native addon; the tfjs-node bindings are not bundled.
  external: ['webgpu', '@tensorflow/tfjs-node', '@tensorflow/tfjs-node-gpu'],
  banner: { js: banner },
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});

const wasmDir = dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm'));
for (const f of readdirSync(wasmDir).filter((f) => f.endsWith('.wasm'))) copyFileSync(join(wasmDir, f), join(out, f));

const webgpuDir = dirname(require.resolve('webgpu/package.json'));
const dawn = join(out, 'node_modules/webgpu/dist/linux-x64');
mkdirSync(dawn, { recursive: true });
for (const f of ['package.json', 'index.js', 'LICENSE.md'])
  copyFileSync(join(webgpuDir, f), join(out, 'node_modules/webgpu', f));
copyFileSync(join(webgpuDir, 'dist/linux-x64/dawn.node'), join(dawn, 'dawn.node'));

if (args['with-node']) copyFileSync(process.execPath, join(out, 'node'));
writeFileSync(
  join(out, 'README.txt'),
  `agent-r1 GPU check bundle, built ${new Date().toISOString()} with Node ${process.version}.\n` +
    'Unpack beside the repository (tar -xJf gpu-bundle.tar.xz) and run bench/gpu-check.sh from the repository root.\n',
);

execFileSync('tar', ['-cJf', `${out}.tar.xz`, '-C', dirname(out), basename(out)], {
  env: { ...process.env, XZ_OPT: '-9' },
});

const size = (p: string): number =>
  statSync(p).isDirectory() ? readdirSync(p).reduce((n, f) => n + size(join(p, f)), 0) : statSync(p).size;
const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
const files = ['train.mjs', 'generate.mjs', 'node_modules', ...(args['with-node'] ? ['node'] : [])];
for (const f of files) process.stdout.write(`${f.padEnd(14)} ${mib(size(join(out, f)))}\n`);
process.stdout.write(
  `${'*.wasm'.padEnd(14)} ${mib(
    readdirSync(out)
      .filter((f) => f.endsWith('.wasm'))
      .reduce((n, f) => n + size(join(out, f)), 0),
  )}\n`,
);
process.stdout.write(`unpacked: ${mib(size(out))}; archive ${out}.tar.xz: ${mib(size(`${out}.tar.xz`))}\n`);
