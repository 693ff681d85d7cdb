import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.ts';
import { ONE_LAYER_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

// The CLI end of test/cli/load-dtype.test.ts: a spawned `model generate --dtype` gives the same
// tokens held 16-bit or widened, and refuses any other dtype.

let root: string;
let dir: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-load-dtype-'));
  dir = join(root, 'qwen3-bf16');
  await writeTinyFolder(dir, {
    ...ONE_LAYER_QWEN3,
    dtype: 'BF16',
    seed: 7,
  });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

test.serial('model generate --dtype: f32 gives the same tokens; anything but auto or f32 is refused', (t) => {
  const generate = (...extra: string[]) =>
    cli([
      'model',
      'generate',
      '--model',
      `hf:${dir}`,
      '--prompt-ids',
      '1,2,3',
      '--max-new-tokens',
      '5',
      '--json',
      ...extra,
    ]);
  const auto = generate();
  t.is(auto.code, 0, auto.stderr);
  const wide = generate('--dtype', 'f32');
  t.is(wide.code, 0, wide.stderr);
  t.deepEqual(wide.lastJson(), auto.lastJson());
  const bad = generate('--dtype', 'bf16');
  t.is(bad.code, 2);
  t.regex(bad.stderr, /--dtype.*expected auto or f32/);
});
