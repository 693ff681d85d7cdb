import test from 'ava';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModelDir } from '../../src/hf/checkpoint.ts';
import { HfFolderError } from '../../src/hf/errors.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { HfTrainable } from '../../src/rl/hf-trainable.ts';
import { TRAINABLE_QWEN3, writeTinyFolder, type TinyFolder } from '../helpers/hf-folder.ts';

// Beside hf-lora.slow.test.ts: a LoRA checkpoint saved, copied and refused three ways (~20 s).
let root: string;
let dir: string;
const SPEC: TinyFolder = { ...TRAINABLE_QWEN3, seed: 21 };
test.before(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-lora-'));
  dir = join(root, 'base');
  await writeTinyFolder(dir, SPEC);
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The trainer's log-probs of each record's sampled tokens against the sampler's: the largest gap. */
test('a LoRA checkpoint whose base folder holds another model, or whose checkpoint.json is wrong, is refused with the file and field', async (t) => {
  const trainable = await HfTrainable.load(dir, { lora: { rank: 2, alpha: 4 }, seed: 5 });
  // Move B off zero so that the adapters change the model.
  trainable.net.adapters.forEach(({ B }) => B.assign(B.add(0.01)));
  await trainable.weightsChanged();
  const good = join(root, 'good');
  await trainable.save(good);
  trainable.net.dispose();
  t.is((await loadModelDir(good)).hash, trainable.version());

  const broken = async (name: string, edit: (d: string) => Promise<void>) => {
    const d = join(root, name);
    await cp(good, d, { recursive: true });
    await edit(d);
    return d;
  };
  const editJson = (file: string, change: (j: { [k: string]: unknown }) => void) => async (d: string) => {
    const j = JSON.parse(await readFile(join(d, file), 'utf8'));
    change(j);
    await writeFile(join(d, file), JSON.stringify(j));
  };
  // The base folder now holds another model.
  const movedBase = join(root, 'moved-base');
  await writeTinyFolder(movedBase, { ...SPEC, seed: 23 });
  const cases: Array<[string, (d: string) => Promise<void>, RegExp]> = [
    [
      'another-base',
      editJson('checkpoint.json', (j) => ((j.base as { dir: string }).dir = movedBase)),
      /checkpoint\.json \(base\).*another model/,
    ],
    ['no-base-dir', editJson('checkpoint.json', (j) => (j.base = { hash: 'x' })), /checkpoint\.json \(base\)/],
    ['wrong-hash', editJson('checkpoint.json', (j) => (j.hash = 'f'.repeat(64))), /\(hash\): content hash mismatch/],
    // What the adapter files themselves may get wrong: test/hf/peft.test.ts.
  ];
  for (const [name, edit, message] of cases) {
    const d = await broken(name, edit);
    await t.throwsAsync(loadModelDir(d), { instanceOf: HfFolderError, message }, name);
  }
});
