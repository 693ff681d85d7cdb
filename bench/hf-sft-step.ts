/**
 * One SFT step of a Hugging Face model (not a test): time and peak RSS of a step of `--batch`
 * sequences × `--length` tokens (the loss on the second half of each; `--microbatch` sequences per
 * forward pass, as `agent-r1 sft --microbatch`), with LoRA and with full
 * fine-tuning, at Qwen3-0.6B's shape or another of bench/random-folders.ts. Each
 * variant runs in a child process of its own, so that its peak RSS is its own: --steps steps, the
 * last timed (the first also compiles the backend's kernels and allocates the optimizer state;
 * at real sizes, where a step takes minutes, that is noise and one step will do).
 *
 *   npx tsx --conditions=source bench/hf-sft-step.ts [--json] [--shape qwen3-0.6b|smollm2-135m-body|tiny] [--variants lora,full] [--batch 8] [--microbatch 1] [--length 512] [--rank 8] [--steps 2]
 *
 * A variant that fails (the backend's memory, say) is reported with its error, not hidden. The last
 * line with --json: {"shape","batch","microbatch","length","load":[…],"rows":[{"variant","ok","stepSeconds",
 * "tokensPerSecond","peakRssGb","trainedParameters","error"?}, …]}.
 */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH_CACHE, randomFolder } from './random-folders.ts';

const { values: args } = parseArgs({
  options: {
    json: { type: 'boolean', default: false },
    shape: { type: 'string', default: 'qwen3-0.6b' },
    variants: { type: 'string', default: 'lora,full' },
    batch: { type: 'string', default: '8' },
    microbatch: { type: 'string', default: '1' },
    length: { type: 'string', default: '512' },
    rank: { type: 'string', default: '8' },
    steps: { type: 'string', default: '2' },
    child: { type: 'string' },
    cache: { type: 'string', default: BENCH_CACHE },
  },
});

const B = Number(args.batch);
const T = Number(args.length);

interface Row {
  variant: string;
  ok: boolean;
  stepSeconds?: number;
  tokensPerSecond?: number;
  peakRssGb: number;
  trainedParameters?: number;
  error?: string;
}

/** In the child: load, two steps, report. */
async function child(variant: string): Promise<void> {
  const { initBackend } = await import('../src/policy/tfjs/backend.ts');
  const { HfTrainable } = await import('../src/rl/hf-trainable.ts');
  const { sftTrainable } = await import('../src/rl/sft-trainable.ts');
  await initBackend();
  const { dir } = await randomFolder(args.shape, { cache: args.cache });
  const rank = Number(args.rank);
  const trainable = await HfTrainable.load(dir, {
    contextLength: T,
    ...(variant === 'lora' ? { lora: { rank, alpha: 2 * rank } } : {}),
  });
  const vocab = trainable.model.config.vocabSize;
  let x = 7;
  const sequences = Array.from({ length: B }, () => {
    const tokens = Array.from({ length: T }, () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return 1000 + (x % Math.min(100_000, vocab - 1000));
    });
    return { tokens, mask: tokens.map((_, i) => (i >= T / 2 ? 1 : 0)) };
  });
  const times: number[] = [];
  await sftTrainable(trainable, {
    sequences,
    steps: Number(args.steps),
    batchSize: B,
    microbatch: Number(args.microbatch),
    lr: 1e-4,
    seed: 0,
    onStep: (s) => times.push((B * T) / s.tokensPerS),
  });
  const row: Row = {
    variant,
    ok: true,
    stepSeconds: times.at(-1)!,
    tokensPerSecond: (B * T) / times.at(-1)!,
    peakRssGb: process.resourceUsage().maxRSS / 1024 / 1024,
    trainedParameters: trainable.variables.reduce((n, v) => n + v.size, 0),
  };
  process.stdout.write(`${JSON.stringify(row)}\n`);
}

if (args.child) {
  await child(args.child);
} else {
  const load = loadavg().map((l) => Number(l.toFixed(2)));
  process.stderr.write(
    `load before: ${load.join(' ')}; ${args.shape}, ${B} × ${T} tokens, ${args.microbatch} per pass\n`,
  );
  const rows: Row[] = [];
  for (const variant of args.variants.split(',')) {
    const r = spawnSync(
      process.execPath,
      [
        '--import=tsx',
        '--conditions=source',
        fileURLToPath(import.meta.url),
        ...process.argv.slice(2).filter((a) => a !== '--json'),
        '--child',
        variant,
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    const line = r.stdout.trim().split('\n').at(-1) ?? '';
    const row: Row = line.startsWith('{')
      ? JSON.parse(line)
      : {
          variant,
          ok: false,
          peakRssGb: Number.NaN,
          // The error's own line (Node ends its report with its version).
          error: (
            r.stderr
              .split('\n')
              .filter((l) => /Error\b/.test(l) && l.length < 500)
              .at(-1) ?? `exit ${r.status}`
          ).trim(),
        };
    rows.push(row);
    process.stderr.write(
      row.ok
        ? `${variant.padEnd(5)} ${row.stepSeconds!.toFixed(1)} s/step, ${row.tokensPerSecond!.toFixed(1)} tokens/s, peak RSS ${row.peakRssGb.toFixed(2)} GB, ${row.trainedParameters} trained parameters\n`
        : `${variant.padEnd(5)} failed: ${row.error}\n`,
    );
  }
  if (args.json)
    process.stdout.write(
      `${JSON.stringify({ shape: args.shape, batch: B, microbatch: Number(args.microbatch), length: T, load, rows })}\n`,
    );
}
