/**
 * Generation of a Hugging Face model against llama.cpp (not a test): prefill and decode tokens/s
 * of the Llama family's decode kernel and of llama.cpp (node-llama-cpp 3.21.1's CPU build, installed
 * on first use by test/oracles/llama-cpp.mjs) on the same random weights in the same dtype (the
 * folder's: F32, or BF16 for the `-bf16` shapes; the GGUF is this project's export of the folder in
 * that dtype; both engines keep F32 keys and values), in one run.
 *
 *   npx tsx --conditions=source bench/llm.ts [--json] [--shapes qwen3-0.6b,tiny (also qwen3-0.6b-bf16, smollm2-135m-body)] [--batches 1,16] [--prompt 128] [--decode 32] [--threads N] [--cache DIR]
 *
 * Each row: B sequences of a `prompt`-token prompt each. Prefill: the B prompts in one batch (llama.cpp:
 * B sequences of one context evaluated at once), tokens / time. Decode: then `decode` greedy tokens
 * per sequence, one step for all B at a time; the figure aggregates over the batch (B·decode / time).
 * Both engines run on --threads threads (default: one per core).
 * Random folders and their GGUFs are made once and kept in --cache (default ~/.cache/agent-r1/bench).
 * The last line with --json: {"threads":N,"load":[…],"rows":[{"shape","dtype","batch","ours":{"prefillTokensPerSecond",
 * "decodeTokensPerSecond"},"llamaCpp":{…}}, …]}.
 */
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { LlamaDecoder } from '../src/architectures/llama/decoder.ts';
import { loadHfModel, openHfFolder } from '../src/hf/folder.ts';
import { BENCH_CACHE, randomFolder, SHAPES } from './random-folders.ts';
// @ts-expect-error: a plain ES module beside the tests (node-llama-cpp is not a dependency)
import { openLlama } from '../test/oracles/llama-cpp.mjs';

const { values: args } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    shapes: { type: 'string', default: 'qwen3-0.6b,tiny' },
    batches: { type: 'string', default: '1,16' },
    prompt: { type: 'string', default: '128' },
    decode: { type: 'string', default: '32' },
    threads: { type: 'string', default: String(availableParallelism()) },
    cache: { type: 'string', default: BENCH_CACHE },
  },
});

const say = (line: string) => process.stderr.write(`${line}\n`);
const PROMPT = Number(args.prompt);
const DECODE = Number(args.decode);
const threads = Number(args.threads);
const batches = args.batches.split(',').map(Number);
process.env.AGENT_R1_KERNEL_THREADS = String(threads);

interface Rates {
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
}

/** The prompts: B rows of PROMPT token ids drawn from the tokenizer's ordinary tokens, seeded. */
function prompts(B: number): number[][] {
  let x = 12345;
  const next = () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return 1000 + (x % 100_000);
  };
  return Array.from({ length: B }, () => Array.from({ length: PROMPT }, next));
}

const argmax = (l: Float32Array) => {
  let best = 0;
  for (let i = 1; i < l.length; i++) if (l[i]! > l[best]!) best = i;
  return best;
};

async function ours(dir: string, B: number): Promise<Rates> {
  const folder = await openHfFolder(dir);
  const { model } = await loadHfModel(folder, { contextLength: PROMPT + DECODE + 8 });
  // The decoder in the memories the weights were loaded into (AGENT_R1_KERNEL_THREADS is set to --threads).
  const decoder = LlamaDecoder.for(model);
  await decoder.prepare();
  const rows = prompts(B);
  const session = decoder.session(rows.map(() => ({ capacity: PROMPT + DECODE + 1 })));
  try {
    let t0 = performance.now();
    let logits = session.step(rows.map((tokens, slot) => ({ slot, tokens })));
    const prefillS = (performance.now() - t0) / 1000;
    let next = logits.map(argmax);
    t0 = performance.now();
    for (let s = 0; s < DECODE; s++) {
      logits = session.step(next.map((token, slot) => ({ slot, tokens: [token] })));
      next = logits.map(argmax);
    }
    const decodeS = (performance.now() - t0) / 1000;
    return { prefillTokensPerSecond: (B * PROMPT) / prefillS, decodeTokensPerSecond: (B * DECODE) / decodeS };
  } finally {
    session.close();
  }
}

async function llamaCpp(gguf: string, B: number): Promise<Rates> {
  const llama = await openLlama();
  const model = await llama.loadModel({ modelPath: gguf });
  const context = await model.createContext({
    contextSize: B * (PROMPT + DECODE + 8),
    sequences: B,
    threads,
    batchSize: Math.max(512, B * PROMPT),
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
    flashAttention: false,
  });
  try {
    const sequences = Array.from({ length: B }, () => context.getSequence());
    const rows = prompts(B);
    // One untimed token first: llama.cpp maps the GGUF and reads each weight from the file on first
    // touch, where ours are in memory once prepared; without it a short prompt times the reads.
    await sequences[0]!.evaluateWithoutGeneratingNewTokens(rows[0]!.slice(0, 1));
    await sequences[0]!.clearHistory();
    let t0 = performance.now();
    await Promise.all(sequences.map((s, i) => s.evaluateWithoutGeneratingNewTokens(rows[i]!.slice(0, -1))));
    // The last prompt token of each row is fed with the first decode step (as ours feeds it in the prefill).
    const prefillS = (performance.now() - t0) / 1000;
    t0 = performance.now();
    let firstS = 0;
    await Promise.all(
      sequences.map(async (s, i) => {
        let n = 0;
        for await (const _ of s.evaluate([rows[i]!.at(-1)!], { temperature: 0 })) {
          if (++n === 1 && i === 0) firstS = (performance.now() - t0) / 1000;
          if (n === DECODE + 1) break;
        }
      }),
    );
    const decodeS = (performance.now() - t0) / 1000 - firstS;
    return {
      prefillTokensPerSecond: (B * PROMPT) / (prefillS + firstS),
      decodeTokensPerSecond: (B * DECODE) / decodeS,
    };
  } finally {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  }
}

const load = loadavg().map((x) => Number(x.toFixed(2)));
say(`load before: ${load.join(' ')}; threads ${threads}; prompt ${PROMPT}, decode ${DECODE}`);
const out: Array<{ shape: string; dtype: string; batch: number; ours: Rates; llamaCpp: Rates }> = [];
for (const shape of args.shapes.split(',')) {
  const { dir, gguf } = await randomFolder(shape, { cache: args.cache, gguf: true, say });
  const dtype = SHAPES[shape]!.dtype ?? 'F32';
  for (const B of batches) {
    const a = await ours(dir, B);
    const b = await llamaCpp(gguf, B);
    out.push({ shape, dtype, batch: B, ours: a, llamaCpp: b });
    const f = (x: number) => x.toFixed(1).padStart(8);
    say(
      `${shape.padEnd(15)} batch ${String(B).padStart(2)}  prefill ${f(a.prefillTokensPerSecond)} vs ${f(b.prefillTokensPerSecond)} tok/s (${(a.prefillTokensPerSecond / b.prefillTokensPerSecond).toFixed(2)}×)` +
        `  decode ${f(a.decodeTokensPerSecond)} vs ${f(b.decodeTokensPerSecond)} tok/s (${(a.decodeTokensPerSecond / b.decodeTokensPerSecond).toFixed(2)}×)`,
    );
  }
}
if (args.json) process.stdout.write(`${JSON.stringify({ threads, load, rows: out })}\n`);
