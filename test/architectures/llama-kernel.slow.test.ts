import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateOnKernel } from '../../src/architectures/generation.ts';
import { align16 } from '../../src/architectures/kernel/kernel-host.ts';
import { LlamaDecoder } from '../../src/architectures/llama/decoder.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { referenceGenerate, writeTinyFolder, type TinyFolder } from '../helpers/hf-folder.ts';

let root: string;
test.before(async () => {
  root = await mkdtemp(join(tmpdir(), 'agent-r1-llama-kernel-'));
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const PROMPT = '<|im_start|>user\nWhat is 17 × 3? Answer in one word, naïvely 😀<|im_end|>\n<|im_start|>assistant\n';

// One of each architecture, each with what sets it apart: Qwen3's q/k norm and head_dim ≠ hidden/heads,
// Qwen2's q/k/v biases and an untied head, Llama's Llama 3 rope scaling and 4:1 GQA.
const FOLDERS: Array<[string, TinyFolder]> = [
  [
    'Qwen3 (q/k norm, head_dim 32 with hidden 48, tied)',
    {
      architecture: 'Qwen3ForCausalLM',
      hidden: 48,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      headDim: 32,
      intermediate: 80,
      seed: 11,
    },
  ],
  [
    'Qwen2 (q/k/v biases, untied)',
    {
      architecture: 'Qwen2ForCausalLM',
      hidden: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      intermediate: 96,
      tie: false,
      seed: 12,
    },
  ],
  [
    'Llama (Llama 3 rope scaling, 4:1 GQA, BF16)',
    {
      architecture: 'LlamaForCausalLM',
      hidden: 64,
      layers: 2,
      heads: 4,
      kvHeads: 1,
      intermediate: 96,
      dtype: 'BF16',
      seed: 13,
      ropeScaling: {
        rope_type: 'llama3',
        factor: 8,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 64,
      },
    },
  ],
];

for (const [name, spec] of FOLDERS) {
  test(`the kernel generates what the reference written from Transformers' equations does: ${name}`, async (t) => {
    const dir = join(root, spec.architecture);
    await writeTinyFolder(dir, spec);
    const folder = await openHfFolder(dir);
    const { model } = await loadHfModel(folder);
    const prompt = folder.tokenizer.encode(PROMPT);
    const [ours] = await generateOnKernel(LlamaDecoder.for(model), [{ tokens: prompt, seed: 0, maxTokens: 10 }], {
      sampling: { temperature: 0 },
      eosTokens: new Set(folder.eosTokenIds),
    });
    const reference = referenceGenerate(dir, prompt, 10);
    t.deepEqual(ours!.tokens, reference.ids);
    ours!.logprobs.forEach((lp, i) =>
      t.true(Math.abs(lp - reference.logprobs[i]!) < 1e-4, `token ${i}: ${lp} vs ${reference.logprobs[i]}`),
    );
  });
}

test("a row's logits are the same bits alone and in a batch with rows of other lengths, and a cache continues exactly", async (t) => {
  const dir = join(root, 'batch');
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 40,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 72,
    seed: 5,
  });
  const { model } = await loadHfModel(await openHfFolder(dir));
  const decoder = LlamaDecoder.for(model);
  await decoder.prepare();
  const rows = [[151644, 872, 198, 9707, 11, 1128], [5, 6], Array.from({ length: 37 }, (_, i) => 100 + i * 7)];
  const alone = rows.map((tokens) => {
    const s = decoder.session([{ capacity: 64 }]);
    try {
      return s.step([{ slot: 0, tokens }])[0]!.slice();
    } finally {
      s.close();
    }
  });
  const s = decoder.session(rows.map(() => ({ capacity: 64 })));
  const together = s.step(rows.map((tokens, slot) => ({ slot, tokens }))).map((l) => l.slice());
  const cache = s.exportCache(2);
  s.close();
  together.forEach((logits, i) => t.deepEqual(logits, alone[i]!, `row ${i}`));
  // Prefill in two parts, the second on the cache the first left: the same bits as in one part.
  const step = (tokens: number[], c?: typeof cache) => {
    const session = decoder.session([{ cache: c, capacity: 64 }]);
    try {
      return session.step([{ slot: 0, tokens }])[0]!.slice();
    } finally {
      session.close();
    }
  };
  t.deepEqual(step([9, 8, 7], cache), step([...rows[2]!, 9, 8, 7]));
});

test('kernel memory addresses past 2 GiB (a model of a few GB) are aligned without 32-bit overflow', (t) => {
  t.is(align16(2 ** 31 + 5), 2 ** 31 + 16);
  t.is(align16(3 * 2 ** 30 + 16), 3 * 2 ** 30 + 16);
});

test('a step gives the same bits on one thread as on several, shares uneven or not', async (t) => {
  const dir = join(root, 'threads');
  await writeTinyFolder(dir, {
    architecture: 'Qwen2ForCausalLM',
    hidden: 40,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    intermediate: 72,
    tie: false,
    seed: 6,
  });
  const { model } = await loadHfModel(await openHfFolder(dir));
  const rows = [[151644, 872, 198, 9707, 11], [5], Array.from({ length: 23 }, (_, i) => 100 + i * 11)];
  const run = async (threads: number) => {
    const decoder = new LlamaDecoder(model, { threads });
    await decoder.prepare();
    const s = decoder.session(rows.map(() => ({ capacity: 64 })));
    try {
      const prefill = s.step(rows.map((tokens, slot) => ({ slot, tokens }))).map((l) => l.slice());
      const next = s.step(rows.map((_, slot) => ({ slot, tokens: [slot + 1] }))).map((l) => l.slice());
      return [...prefill, ...next];
    } finally {
      s.close();
    }
  };
  const one = await run(1);
  t.deepEqual(await run(2), one);
  t.deepEqual(await run(3), one);
});
