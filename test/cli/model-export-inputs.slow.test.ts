import test from 'ava';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { HfTrainable } from '../../src/rl/hf-trainable.ts';
import { cli } from '../helpers/cli.ts';
import { TRAINABLE_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

const root = mkdtempSync(join(tmpdir(), 'agent-r1-export-inputs-'));
const parent = join(root, 'models');
const dir = join(parent, 'base');
const lora = join(root, 'lora');
test.before(async () => {
  await writeTinyFolder(dir, { ...TRAINABLE_QWEN3, seed: 5 });
  await initBackend('wasm');
  await (await HfTrainable.load(dir, { lora: { rank: 2, alpha: 8 }, seed: 1 })).save(lora);
});
test.after.always(() => rmSync(root, { recursive: true, force: true }));

/** Every file under `folder` with its bytes, by path: what must survive a refused export. */
function snapshot(folder: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const entry of readdirSync(folder, { recursive: true, withFileTypes: true }))
    if (entry.isFile()) files.set(join(entry.parentPath, entry.name), readFileSync(join(entry.parentPath, entry.name)));
  return files;
}

const exportArgs = (model: string, format: string, out: string) => [
  'model',
  'export',
  '--model',
  model,
  '--format',
  format,
  '--out',
  out,
  '--force',
];

test.serial(
  'model export --force refuses an --out that is, holds or lies in a folder it reads, and the folders keep every byte',
  (t) => {
    const link = join(root, 'link-to-base');
    symlinkSync(dir, link);
    const before = snapshot(root);
    const cases: [string, string, string, string, RegExp][] = [
      ['the source folder', `hf:${dir}`, 'hf', dir, /--out .*base is .*base, which the export reads from/],
      ["the source's parent", `hf:${dir}`, 'hf', parent, /--out .*models contains .*base, which the export reads/],
      ['a file in the source', `hf:${dir}`, 'gguf', join(dir, 'model.safetensors'), /is inside .*base, which the/],
      ['a link to the source', `hf:${dir}`, 'hf', link, /--out .*link-to-base is .*base, which the export reads/],
      ["a LoRA checkpoint's base", `ckpt:${lora}`, 'hf', dir, /--out .*base is .*base, which the export reads from/],
      ['the LoRA checkpoint itself', `ckpt:${lora}`, 'gguf', lora, /--out .*lora is .*lora, which the export reads/],
    ];
    for (const [what, model, format, out, message] of cases) {
      const r = cli(exportArgs(model, format, out));
      t.is(r.code, 2, `${what}: ${r.stderr}`);
      t.regex(r.stderr, message, what);
      t.regex(r.stderr, /choose an --out outside it/);
    }
    const after = snapshot(root);
    t.deepEqual([...after.keys()], [...before.keys()], 'no file removed or added');
    for (const [file, bytes] of before) t.true(after.get(file)!.equals(bytes), file);
    // The checkpoint still loads on its base: its adapters merge and the hashes match.
    const again = cli(['model', 'export', '--model', `ckpt:${lora}`, '--format', 'hf', '--out', join(root, 'merged')]);
    t.is(again.code, 0, again.stderr);
    t.true(existsSync(join(root, 'merged', 'model.safetensors')));
  },
);

test.serial(
  'model export --force replaces an --out that is not an input with a whole export, leaving nothing aside',
  (t) => {
    const out = join(root, 'out');
    mkdirSync(out);
    writeFileSync(join(out, 'stale.txt'), 'from before');
    const r = cli(exportArgs(`hf:${dir}`, 'hf', out));
    t.is(r.code, 0, r.stderr);
    t.false(existsSync(join(out, 'stale.txt')), 'the old folder is replaced, not merged into');
    t.true(readFileSync(join(out, 'model.safetensors')).equals(readFileSync(join(dir, 'model.safetensors'))));
    const gguf = join(root, 'model.gguf');
    writeFileSync(gguf, 'old');
    t.is(cli(exportArgs(`hf:${dir}`, 'gguf', gguf)).code, 0);
    t.is(readFileSync(gguf).subarray(0, 4).toString('ascii'), 'GGUF');
    t.deepEqual(
      readdirSync(root).filter((name) => name.startsWith('.')),
      [],
      'no temporary export or replaced output is left',
    );
  },
);

test.serial('an export that fails leaves an existing --out as it was (--force)', (t) => {
  const out = join(root, 'kept');
  mkdirSync(out);
  writeFileSync(join(out, 'model.safetensors'), 'keep me');
  // A checkpoint that opens but whose weights fail their hash: the export fails while it loads them.
  const bad = join(root, 'lora-bad');
  cpSync(lora, bad, { recursive: true });
  const meta = JSON.parse(readFileSync(join(bad, 'checkpoint.json'), 'utf8'));
  writeFileSync(join(bad, 'checkpoint.json'), JSON.stringify({ ...meta, hash: '0'.repeat(64) }));
  const r = cli(exportArgs(`ckpt:${bad}`, 'hf', out));
  t.is(r.code, 1, r.stderr);
  t.regex(r.stderr, /content hash mismatch/);
  t.is(readFileSync(join(out, 'model.safetensors'), 'utf8'), 'keep me');
  t.deepEqual(
    readdirSync(root).filter((name) => name.startsWith('.')),
    [],
  );
});
