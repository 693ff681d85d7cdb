import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SOURCE_ARGS, repoRoot } from '../helpers/cli.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// The decode kernel with LoRA adapters on two threads, in fresh processes started four at a time
// (so that V8 compiles the kernel while busy neighbours run): every one gives the logits of one
// thread, bit for bit. A barrier inside the adapters' call once desynchronized the threads in about
// one such process in ten (a step ending on one thread while the other was in it: zero logits or a hang).

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-lora-threads-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The child's printed hash of the logits (a hang is a failure after 60 s). */
function childHash(dir: string, threads: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...SOURCE_ARGS, join(repoRoot, 'test/helpers/lora-logits-child.ts'), dir, String(threads)],
      { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code, signal) =>
      code === 0 ? resolve(out.trim()) : reject(new Error(`child exit ${code ?? signal}: ${err}`)),
    );
  });
}

test('LoRA decoding on 2 threads in 16 fresh, crowded processes gives the logits of 1 thread, bit for bit', async (t) => {
  t.timeout(600_000);
  const dir = join(root, 'qwen3');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 48,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 96,
    seed: 41,
    embedStd: 0.5,
  });
  const want = await childHash(dir, 1);
  const got: string[] = [];
  for (let round = 0; round < 4; round++)
    got.push(...(await Promise.all(Array.from({ length: 4 }, () => childHash(dir, 2)))));
  t.deepEqual(got, Array(16).fill(want));
});
