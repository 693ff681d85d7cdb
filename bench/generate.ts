/**
 * Generation benchmark (not a test): prefill and cached-decode tokens/s of the tfjs GPT at batch 1,
 * 16 and 64 for 256-token sequences, by each decoder (`tensors`: decode.ts forwardRows, dense layers
 * in tfjs and attention in JS; `kernel`: the WebAssembly SIMD decode kernel), with the backend's own
 * 2-D matmul GFLOP/s measured in the same run and each rate as a share of it.
 *
 *   npx tsx --conditions=source bench/generate.ts [--json] [--backend wasm] [--paths tensors,kernel] [--batches 1,16,64] [--repeats 3] [--d-model 64] [--layers 2] [--vocab 1024] [--copy-head] [--length 256] [--matmul-size 512] [--clock wall|cpu]
 *
 * Prefill: B rows of `length` tokens on empty caches, one forward. Decode: B rows whose caches hold a
 * prompt of `length` − 32 tokens (from an earlier generate call, as a policy's next turn has), then
 * 32 tokens each, sampled (one step per token): the generate call's tokens / its time. Each figure is
 * the median of --repeats runs; the matmul rate is the best of its samples through the run. On a
 * machine shared with other jobs, --clock cpu times everything by this process's CPU time, which their
 * load inflates less than wall time (it still shares caches and cores with them). FLOPs count every matmul and attention product (2 per multiply-add):
 * decode at the decode steps' mean context, prefill over its causal contexts, the head once per row.
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/policy/tfjs/backend.ts';
import { forwardRows, newCache } from '../src/architectures/gpt/decode.ts';
import { type Decoder, defaultDecoder, generate } from '../src/policy/tfjs/generate.ts';
import { KernelDecoder } from '../src/architectures/gpt/kernel/kernel-decoder.ts';
import { DEFAULT_MODEL_CONFIG } from '../src/architectures/gpt/model-config.ts';
import { GPTModel } from '../src/architectures/gpt/model.ts';

const { values: args } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    backend: { type: 'string' },
    paths: { type: 'string' },
    batches: { type: 'string', default: '1,16,64' },
    repeats: { type: 'string', default: '3' },
    'd-model': { type: 'string', default: String(DEFAULT_MODEL_CONFIG.dModel) },
    layers: { type: 'string', default: String(DEFAULT_MODEL_CONFIG.nLayers) },
    vocab: { type: 'string', default: '1024' },
    'copy-head': { type: 'boolean', default: false },
    length: { type: 'string', default: '256' },
    // 512 fits a CPU thread; a GPU needs a larger product to reach its rate (gpu-check.sh: 2048).
    'matmul-size': { type: 'string', default: '512' },
    // cpu: time every figure (the matmul's too) by this process's CPU time instead of the wall clock.
    clock: { type: 'string', default: 'wall' },
  },
});
if (args.clock !== 'wall' && args.clock !== 'cpu') throw new Error(`--clock is wall or cpu, not ${args.clock}`);
/** Milliseconds on the chosen clock: wall time, or CPU time (user + system) of this process. */
const now =
  args.clock === 'cpu'
    ? () => {
        const u = process.cpuUsage();
        return (u.user + u.system) / 1000;
      }
    : () => performance.now();

const backend = await initBackend(args.backend);
const d = Number(args['d-model']);
const L = Number(args.length);
const DECODE = 32;
const config = {
  ...DEFAULT_MODEL_CONFIG,
  vocabSize: Number(args.vocab),
  dModel: d,
  dMlp: 4 * d,
  nLayers: Number(args.layers),
  copyHead: args['copy-head']!,
  contextLength: Math.max(DEFAULT_MODEL_CONFIG.contextLength, L),
};
const model = new GPTModel(config, 1);
const batches = args.batches!.split(',').map(Number);
const repeats = Math.max(1, Number(args.repeats));
// The kernel is a CPU decoder: on a GPU backend it is measured only when asked for.
const paths = (args.paths ?? (defaultDecoder() === 'kernel' ? 'tensors,kernel' : 'tensors')).split(',') as Decoder[];
for (const p of paths) if (p !== 'tensors' && p !== 'kernel') throw new Error(`unknown path ${p} (tensors, kernel)`);

/** Matmul FLOPs of one token attending over `ctx` keys: dense layers, attention, copy keys (head apart). */
function bodyFlops(ctx: number): number {
  const { dMlp, nLayers } = config;
  const dense = nLayers * (4 * d * d + 2 * d * dMlp) + (config.copyHead ? d * d : 0);
  return 2 * dense + 2 * 2 * nLayers * ctx * d;
}
/** The output head of one row's last token (vocabulary; copy query, scores over ctx, gate). */
function headFlops(ctx: number): number {
  return 2 * d * config.vocabSize + (config.copyHead ? 2 * (d * d + ctx * d + d) : 0);
}
const decodeFlops = (() => {
  let f = 0;
  for (let c = L - DECODE + 1; c <= L; c++) f += bodyFlops(c) + headFlops(c);
  return f / DECODE;
})();
const prefillFlops = (() => {
  let f = headFlops(L);
  for (let c = 1; c <= L; c++) f += bodyFlops(c);
  return f / L;
})();

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
    const t0 = now();
    const c = tf.matMul(a, b);
    await c.data();
    best = Math.min(best, now() - t0);
    c.dispose();
  }
  tf.dispose([a, b]);
  return (2 * n ** 3) / best / 1e6;
}

const prompt = (b: number, n: number) => Array.from({ length: n }, (_, j) => (j * 131 + b * 17 + 7) % config.vocabSize);
const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** One prefill of B rows × L tokens on empty caches, ms. */
async function prefillMs(path: Decoder, B: number): Promise<number> {
  if (path === 'tensors') {
    const t0 = now();
    const out = await forwardRows(
      model,
      Array.from({ length: B }, (_, b) => ({ tokens: prompt(b, L), cache: newCache(model, L) })),
    );
    await out.data();
    const ms = now() - t0;
    out.dispose();
    return ms;
  }
  const decoder = KernelDecoder.for(model);
  const t0 = now();
  await decoder.prepare();
  const session = decoder.session(Array.from({ length: B }, () => ({ capacity: L })));
  try {
    session.step(Array.from({ length: B }, (_, b) => ({ slot: b, tokens: prompt(b, L) })));
  } finally {
    session.close();
  }
  return now() - t0;
}

/** Tokens/s of B rows generating DECODE tokens each on caches that hold an L − DECODE prompt. */
async function decodeTokS(path: Decoder, B: number): Promise<number> {
  const first = await generate(
    model,
    Array.from({ length: B }, (_, b) => ({ tokens: prompt(b, L - DECODE), seed: b, maxTokens: 1 })),
    { decoder: path, keepCache: true },
  );
  const rows = first.map((r, b) => ({
    tokens: [...prompt(b, L - DECODE), r.tokens[0]!],
    seed: b,
    maxTokens: DECODE,
    cache: r.cache!,
  }));
  const t0 = now();
  const out = await generate(model, rows, { decoder: path });
  const ms = now() - t0;
  const tokens = out.reduce((n, r) => n + r.tokens.length, 0);
  if (tokens !== B * DECODE) throw new Error(`decoded ${tokens} tokens, expected ${B * DECODE}`);
  return (tokens / ms) * 1000;
}

interface Row {
  path: Decoder;
  batch: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  prefillGflops: number;
  decodeGflops: number;
  prefillShareOfMatmul: number;
  decodeShareOfMatmul: number;
}

// The matmul rate is taken before and after each path's batches, and its best counts: on a shared
// machine one sample can land on a busy moment, and the best is the denominator least kind to the shares.
const matmulSamples = [await matmulGflops()];
const rows: Row[] = [];
for (const path of paths) {
  // Warm-up: the first calls compile (tfjs kernels; the kernel's functions start in V8's baseline
  // tier and move up after some calls) and grow the memory the largest batch needs.
  await prefillMs(path, Math.max(...batches));
  await prefillMs(path, 2);
  await decodeTokS(path, 2);
  for (const B of batches) {
    const pre: number[] = [];
    const dec: number[] = [];
    for (let i = 0; i < repeats; i++) {
      pre.push(((B * L) / (await prefillMs(path, B))) * 1000);
      dec.push(await decodeTokS(path, B));
    }
    const prefill = median(pre);
    const decode = median(dec);
    rows.push({
      path,
      batch: B,
      prefillTokensPerSecond: prefill,
      decodeTokensPerSecond: decode,
      prefillGflops: (prefill * prefillFlops) / 1e9,
      decodeGflops: (decode * decodeFlops) / 1e9,
      prefillShareOfMatmul: 0,
      decodeShareOfMatmul: 0,
    });
    matmulSamples.push(await matmulGflops());
  }
}
const peak = Math.max(...matmulSamples);
for (const r of rows) {
  r.prefillShareOfMatmul = r.prefillGflops / peak;
  r.decodeShareOfMatmul = r.decodeGflops / peak;
}

const result = {
  backend: backend.name,
  clock: args.clock,
  reason: backend.reason,
  load: loadavg()[0],
  model: { ...config, parameters: model.parameterCount() },
  sequenceLength: L,
  decodeTokens: DECODE,
  repeats,
  flopsPerToken: { prefill: prefillFlops, decode: decodeFlops },
  matmulGflops: peak,
  matmulSamples,
  rows,
};
if (args.json) {
  process.stdout.write(JSON.stringify(result) + '\n');
} else {
  const f = (x: number, w: number, p = 0) => x.toFixed(p).padStart(w);
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`.padStart(8);
  process.stdout.write(
    `backend ${backend.name}; model d=${d} L=${config.nLayers} H=${config.nHeads} V=${config.vocabSize}` +
      `${config.copyHead ? ' copy head' : ''} (${model.parameterCount()} parameters); ${L}-token sequences, ` +
      `decode ${DECODE} tokens on a ${L - DECODE}-token cache; median of ${repeats}; ${args.clock} clock; ` +
      `backend 2-D matmul ${peak.toFixed(1)} GFLOP/s (best of ${matmulSamples.length} in the run); load ${loadavg()[0].toFixed(2)}\n\n` +
      (args.clock === 'cpu'
        ? ' path    | batch | prefill tok/cpu-s | GFLOP/cpu-s | of matmul | decode tok/cpu-s | GFLOP/cpu-s | of matmul\n'
        : ' path    | batch | prefill tok/s | GFLOP/s | of matmul | decode tok/s | GFLOP/s | of matmul\n') +
      ':--------|------:|--------------:|--------:|----------:|-------------:|--------:|----------:\n' +
      rows
        .map(
          (r) =>
            ` ${r.path.padEnd(7)} | ${f(r.batch, 5)} | ${f(r.prefillTokensPerSecond, 13)} | ${f(r.prefillGflops, 7, 2)} | ${pct(r.prefillShareOfMatmul)}  | ${f(r.decodeTokensPerSecond, 12)} | ${f(r.decodeGflops, 7, 2)} | ${pct(r.decodeShareOfMatmul)}`,
        )
        .join('\n') +
      '\n',
  );
}
