/**
 * Generation benchmark (not a test): prefill and decode tokens/s of the tfjs GPT at batch 1, 16
 * and 64, with and without the KV cache, for 256-token sequences; the backend's own 2-D matmul
 * GFLOP/s measured in the same run, and decoding's achieved GFLOP/s as a fraction of it.
 *
 *   npx tsx --conditions=source bench/generate.ts [--json] [--backend wasm] [--batches 1,16,64] [--d-model 64] [--layers 2] [--vocab 1024] [--length 256] [--matmul-size 512]
 *
 * Sequences: a prompt of 256 − D tokens, then D decoded tokens (D = 32 with the cache, 8 without:
 * uncached decoding recomputes the whole sequence every step, so fewer steps measure it as well).
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import { forwardRows, newCache } from '../src/policy/tfjs/decode.ts';
import { DEFAULT_MODEL_CONFIG } from '../src/policy/tfjs/model-config.ts';
import { GPTModel } from '../src/policy/tfjs/model.ts';
import { generate } from '../src/policy/tfjs/generate.ts';

const { values: args } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    backend: { type: 'string' },
    batches: { type: 'string', default: '1,16,64' },
    'd-model': { type: 'string', default: String(DEFAULT_MODEL_CONFIG.dModel) },
    layers: { type: 'string', default: String(DEFAULT_MODEL_CONFIG.nLayers) },
    vocab: { type: 'string', default: '1024' },
    length: { type: 'string', default: '256' },
    // 512 fits a CPU thread; a GPU needs a larger product to reach its rate (gpu-check.sh: 2048).
    'matmul-size': { type: 'string', default: '512' },
  },
});

const backend = await initBackend(args.backend);
const d = Number(args['d-model']);
const config = {
  ...DEFAULT_MODEL_CONFIG,
  vocabSize: Number(args.vocab),
  dModel: d,
  dMlp: 4 * d,
  nLayers: Number(args.layers),
};
const model = new GPTModel(config, 1);
const L = Number(args.length);
const batches = args.batches!.split(',').map(Number);

/** Forward FLOPs of one token at context length `ctx` (matmuls only; attention over ctx keys). */
function tokenFlops(ctx: number, withHead = true): number {
  const { dModel: dm, dMlp, nLayers, vocabSize } = config;
  const dense = nLayers * (4 * dm * dm + 2 * dm * dMlp) + (withHead ? dm * vocabSize : 0);
  return 2 * dense + 2 * 2 * nLayers * ctx * dm;
}

/** The backend's 2-D matmul rate (n × n, --matmul-size), GFLOP/s, best of 5 after a warm-up. */
async function matmulGflops(): Promise<number> {
  const n = Number(args['matmul-size']);
  const a = tf.randomNormal([n, n]);
  const b = tf.randomNormal([n, n]);
  const warm = tf.matMul(a, b);
  await warm.data();
  warm.dispose();
  let best = Infinity;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const c = tf.matMul(a, b);
    await c.data();
    best = Math.min(best, performance.now() - t0);
    c.dispose();
  }
  tf.dispose([a, b]);
  return (2 * n ** 3) / best / 1e6;
}

const prompt = (b: number, n: number) => Array.from({ length: n }, (_, j) => (j * 131 + b * 17 + 7) % config.vocabSize);

interface Row {
  batch: number;
  prefillTokS: number;
  cachedDecodeTokS: number;
  uncachedDecodeTokS: number;
  speedup: number;
  decodeGflops: number;
  fractionOfMatmul: number;
}

const peak = await matmulGflops();
const rows: Row[] = [];
for (const B of batches) {
  // Prefill: B rows of L tokens in one pass (the first step of cached generation).
  (await forwardRows(model, [{ tokens: prompt(0, 8), cache: newCache(model) }])).dispose();
  const t0 = performance.now();
  const pre = await forwardRows(
    model,
    Array.from({ length: B }, (_, b) => ({ tokens: prompt(b, L), cache: newCache(model, L) })),
  );
  await pre.data();
  const prefillMs = performance.now() - t0;
  pre.dispose();

  // Cached decode: prompt L−32, then 32 tokens; time the decode part (total − prefill of the prompt).
  const decodeWith = async (useCache: boolean, steps: number) => {
    const reqs = Array.from({ length: B }, (_, b) => ({ tokens: prompt(b, L - steps), seed: b, maxTokens: steps }));
    const t1 = performance.now();
    await generate(
      model,
      reqs.map((r) => ({ ...r, maxTokens: 1 })),
      { useCache },
    );
    const prefill = performance.now() - t1;
    const t2 = performance.now();
    const out = await generate(model, reqs, { useCache });
    const total = performance.now() - t2;
    const decoded = out.reduce((n, r) => n + r.tokens.length - 1, 0);
    return (decoded / Math.max(1e-9, total - prefill)) * 1000;
  };
  const cached = await decodeWith(true, 32);
  const uncached = await decodeWith(false, 8);
  const gflops = (cached * tokenFlops(L - 16)) / 1e9;
  rows.push({
    batch: B,
    prefillTokS: ((B * L) / prefillMs) * 1000,
    cachedDecodeTokS: cached,
    uncachedDecodeTokS: uncached,
    speedup: cached / uncached,
    decodeGflops: gflops,
    fractionOfMatmul: gflops / peak,
  });
}

const result = {
  backend: backend.name,
  reason: backend.reason,
  load: loadavg()[0],
  model: { ...config, parameters: model.parameterCount() },
  sequenceLength: L,
  matmulGflops: peak,
  rows,
};
if (args.json) {
  process.stdout.write(JSON.stringify(result) + '\n');
} else {
  const f = (x: number, p = 0) => x.toFixed(p).padStart(10);
  process.stdout.write(
    `backend ${backend.name}; model d=${d} L=${config.nLayers} H=${config.nHeads} V=${config.vocabSize} (${model.parameterCount()} parameters); ` +
      `${L}-token sequences; backend 2-D matmul ${peak.toFixed(1)} GFLOP/s\n\n` +
      ' batch | prefill tok/s | decode tok/s (cache) | decode tok/s (no cache) | cache speed-up | decode GFLOP/s | of matmul\n' +
      '------:|--------------:|---------------------:|------------------------:|---------------:|---------------:|---------:\n' +
      rows
        .map(
          (r) =>
            `${String(r.batch).padStart(6)} |${f(r.prefillTokS)}     |${f(r.cachedDecodeTokS)}            |${f(r.uncachedDecodeTokS)}               |${f(r.speedup, 1)}×     |${f(r.decodeGflops, 2)}      | ${(100 * r.fractionOfMatmul).toFixed(1)}%`,
        )
        .join('\n') +
      '\n',
  );
}
