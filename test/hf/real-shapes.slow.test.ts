import test from 'ava';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { planParts } from '../../src/architectures/llama/decoder.ts';
import { openHfChat } from '../../src/hf/folder.ts';
import { SHAPES } from '../../bench/random-folders.ts';
import { cli, repoRoot } from '../helpers/cli.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';
import { installLlamaCpp, llamaCpp } from '../helpers/llama-cpp.ts';

// Models at the sizes people train agents with, in BF16 as published, random weights at the real
// shapes with Qwen3's tokenizer: Qwen3-1.7B (3.4 GB, one WebAssembly memory) and Qwen2.5-3B (6.2 GB,
// split over three). Each runs through the CLI in a child process of its own (one model in memory at
// a time), its peak resident memory read as it exits; llama.cpp runs the GGUF export.

let root: string;
test.before(async () => {
  installLlamaCpp();
  root = await mkdtemp(join(tmpdir(), 'agent-r1-real-shapes-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const PEAK_RSS = join(repoRoot, 'test/helpers/peak-rss.mjs');
const MESSAGES = [{ role: 'user', content: 'What is the capital of France? Answer in one word.' }];

/** The CLI with its peak resident memory. */
function measured(args: string[]) {
  const run = cli(args, { timeout: 900_000, env: { NODE_OPTIONS: `--import=${PEAK_RSS}` } });
  const peak = Number(/peak-rss (\d+)\s*$/.exec(run.stderr)?.[1]);
  return { ...run, peak };
}

for (const [name, shape, parts, ggufDtype, tolerance] of [
  // llama.cpp's BF16 matmuls round the activations to bfloat16: log-probs a little off (measured: 0.094 at most).
  ['Qwen3-1.7B', 'qwen3-1.7b-bf16', 1, 'bf16', 0.1],
  // At 36 random layers that rounding moves llama.cpp's own greedy choice from the 4th token (its BF16
  // and F32 runs of these weights differ there): checked against its F32 path, which rounds nothing.
  ['Qwen2.5-3B', 'qwen2.5-3b-bf16', 3, 'f32', 1e-3],
] as const) {
  test.serial(
    `${name} in BF16 at its real shape: ${parts} memor${parts > 1 ? 'ies' : 'y'}, peak RSS within 1.3× the weights, greedy ids = llama.cpp's on the ${ggufDtype} GGUF export, log-probs within ${tolerance}`,
    async (t) => {
      t.timeout(1_800_000);
      const dir = join(root, shape);
      await writeTinyFolder(dir, SHAPES[shape]!);
      const chat = await openHfChat(dir);
      t.is(planParts(chat.config, true).length, parts);
      const weightBytes = (await stat(join(dir, 'model.safetensors'))).size;
      const prompt = chat.tokenizer.encode(chat.template!.render({ messages: MESSAGES, addGenerationPrompt: true }));
      const gen = measured([
        'model',
        'generate',
        '--model',
        `hf:${dir}`,
        '--prompt-ids',
        prompt.join(','),
        '--max-new-tokens',
        '8',
        '--json',
      ]);
      t.is(gen.code, 0, gen.stderr);
      const ours = gen.lastJson() as { ids: number[]; logprobs: number[] };
      t.is(ours.ids.length, 8);
      t.true(
        gen.peak <= 1.3 * weightBytes,
        `peak RSS ${(gen.peak / 1e9).toFixed(2)} GB for ${(weightBytes / 1e9).toFixed(2)} GB of weights`,
      );
      const gguf = join(root, `${shape}.gguf`);
      const exported = cli(
        ['model', 'export', '--model', `hf:${dir}`, '--format', 'gguf', '--out', gguf, '--dtype', ggufDtype],
        { timeout: 900_000 },
      );
      t.is(exported.code, 0, exported.stderr);
      await rm(dir, { recursive: true, force: true });
      const cpp = await llamaCpp(root, { model: gguf, generate: { prompt, maxTokens: 8, eos: chat.eosTokenIds } });
      await rm(gguf, { force: true });
      t.deepEqual(ours.ids, cpp.generated!.ids);
      ours.logprobs.forEach((lp, i) =>
        t.true(
          Math.abs(lp - cpp.generated!.logprobs[i]!) < tolerance,
          `token ${i}: ${lp} vs ${cpp.generated!.logprobs[i]}`,
        ),
      );
    },
  );
}
