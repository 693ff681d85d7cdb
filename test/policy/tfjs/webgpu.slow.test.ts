/**
 * The webgpu backend (Dawn) against wasm, through whatever adapter Dawn finds here: on a CPU-only
 * machine that is Mesa's llvmpipe behind OpenGL ES (EGL_PLATFORM=surfaceless), which bin/test-setup.js --slow
 * installs (libegl1, libgles2, libegl-mesa0). Slow: the software GPU runs ~15x slower than wasm.
 *
 * A small checkpoint is trained here on wasm; then one child process per backend (a process
 * initializes one backend) plays greedy dev episodes from it, scores a GRPO batch, saves it again,
 * takes a GRPO step and trains a fresh model for a few SFT steps (backend-parity.ts). Tolerances:
 * - greedy episodes: the same text and tokens;
 * - log-probs (generation and scoring): 2e-4 absolute;
 * - SFT losses and gradient norms, GRPO metrics: 1e-3 relative;
 * - weights after the GRPO step and after the SFT steps: the two backends' updates differ by less
 *   than 2% of the update's size (relative L2). Adam divides by √v, so a gradient near zero that
 *   differs in sign between backends moves its weight by ±lr: elementwise equality is not expected.
 * Skipped only when the `webgpu` package is not installed; installed but without an adapter is a
 * failure (CI installs the drivers).
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { resolvePolicy } from '../../../src/app/resolve-policy.ts';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { saveCheckpoint } from '../../../src/policy/tfjs/checkpoint.ts';
import { trainSft } from '../../../src/policy/tfjs/sft.ts';
import { TfjsPolicy } from '../../../src/policy/tfjs/tfjs-policy.ts';
import { buildTrajectories, fitToContext } from '../../../src/policy/trajectory.ts';
import { probeWebgpu, webgpuVerdict } from '../../../src/policy/tfjs/webgpu.ts';
import { rollout } from '../../../src/rollout/rollout.ts';
import { loadScenario } from '../../../src/scenario/load.ts';
import type { ParityJob, ParityResult } from './backend-parity.ts';

const run = promisify(execFile);

const installed = await import('webgpu').then(
  () => true,
  (error: NodeJS.ErrnoException) => {
    if (error.code === 'ERR_MODULE_NOT_FOUND') return false;
    throw error;
  },
);
const webgpuTest = installed ? test.serial : test.serial.skip;
const skipped = installed ? '' : ' (skipped: the optional package `webgpu` is not installed)';

test.before(async () => {
  await initBackend('wasm');
});

webgpuTest(
  `Dawn finds an adapter here; automatic selection refuses it when it is a software one${skipped}`,
  async (t) => {
    const probe = await probeWebgpu();
    if (typeof probe === 'string') return t.fail(`webgpu does not load: ${probe}`);
    t.log(probe.tried.join('\n'));
    t.truthy(
      probe.chosen,
      'no WebGPU adapter: on Debian install libegl1 libgles2 libegl-mesa0 (bin/test-setup.js --slow does), or a Vulkan driver',
    );
    const found = probe.chosen!;
    const auto = webgpuVerdict(probe, false);
    const forced = webgpuVerdict(probe, true);
    t.true('use' in forced, 'a forced webgpu takes any adapter');
    if (found.kind.hardware) {
      t.log(`a hardware adapter: ${found.kind.label}`);
      t.true('use' in auto);
    } else {
      t.true('skip' in auto && /only a software adapter/.test(auto.skip), JSON.stringify(auto));
    }
  },
);

interface Diff {
  max: number;
  at: number;
}

function maxAbsDiff(a: readonly number[], b: readonly number[]): Diff {
  let max = 0;
  let at = -1;
  a.forEach((x, i) => {
    const d = Math.abs(x - b[i]!);
    if (d > max) [max, at] = [d, i];
  });
  return { max, at };
}

/** ‖(a − start) − (b − start)‖ / ‖b − start‖: how far a's update is from b's, relative to b's. */
function updateGap(a: readonly number[], b: readonly number[], start: readonly number[]): number {
  let num = 0;
  let den = 0;
  a.forEach((x, i) => {
    num += (x - b[i]!) ** 2;
    den += (b[i]! - start[i]!) ** 2;
  });
  return Math.sqrt(num / Math.max(den, 1e-30));
}

const rel = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-6);

webgpuTest(
  `SFT steps, a GRPO step, scoring, checkpoints and greedy generation on webgpu agree with wasm${skipped}`,
  async (t) => {
    t.timeout(20 * 60_000);
    const dir = await mkdtemp(join(tmpdir(), 'webgpu-parity-'));
    try {
      // A small checkpoint that has learned something, so greedy choices are not near-ties.
      const scenario = await loadScenario('calculator', builtinScenarios);
      const expert = await resolvePolicy('expert', scenario, 0);
      const { records } = await rollout({ scenario, policy: expert, split: 'train', episodes: 60, seed: 3 });
      const trained = await trainSft({
        records,
        vocabSize: 400,
        chunking: 'words',
        model: { dModel: 32, nLayers: 1, nHeads: 2, copyHead: true },
        steps: 60,
        batchSize: 8,
        lr: 1e-2,
        seed: 1,
      });
      const ckpt = join(dir, 'ckpt');
      const hash = await saveCheckpoint(ckpt, trained.model, trained.tokenizer);
      // The GRPO batch: the checkpoint's own samples, two per task, with their rewards.
      const sampler = new TfjsPolicy({
        id: 'sampler',
        version: hash,
        model: trained.model,
        tokenizer: trained.tokenizer,
        sampling: { temperature: 1 },
      });
      const sampled = await rollout({ scenario, policy: sampler, split: 'train', episodes: 8, group: 2, seed: 11 });
      const sequences = buildTrajectories(sampled.records)
        .sequences.map((s) => fitToContext(s, trained.model.config.contextLength))
        .filter((s) => s !== null);
      const job: ParityJob = {
        checkpoint: ckpt,
        records: records.slice(0, 24),
        sequences,
        sftSteps: 3,
        devEpisodes: 6,
      };
      await writeFile(join(dir, 'job.json'), JSON.stringify(job));
      const results: { [backend: string]: ParityResult } = {};
      for (const backend of ['wasm', 'webgpu']) {
        const out = join(dir, `${backend}.json`);
        const args = [
          '--import=tsx',
          '--conditions=source',
          'test/policy/tfjs/backend-parity.ts',
          join(dir, 'job.json'),
          backend,
          out,
        ];
        await run(process.execPath, args, { maxBuffer: 64 * 2 ** 20, timeout: 15 * 60_000 }).catch(
          (error: { stderr?: string; message: string }) => {
            // The child's last lines (a minified wasm glue line can precede the error: cut long lines).
            const tail = (error.stderr ?? '')
              .split('\n')
              .slice(-15)
              .map((l) => l.slice(0, 300));
            throw new Error(`the ${backend} run failed: ${error.message.split('\n')[0]}\n${tail.join('\n')}`);
          },
        );
        results[backend] = JSON.parse(await readFile(out, 'utf8')) as ParityResult;
      }
      const [w, g] = [results.wasm!, results.webgpu!];
      t.is(g.backend, 'webgpu');
      t.log(`webgpu: ${g.reason}`);
      t.log(`seconds, wasm: ${JSON.stringify(w.seconds)}`);
      t.log(`seconds, webgpu: ${JSON.stringify(g.seconds)}`);

      // Greedy generation with the KV cache (the rollout's TfjsPolicy): the same episodes.
      t.deepEqual(g.greedy.texts, w.greedy.texts);
      t.deepEqual(g.greedy.tokens, w.greedy.tokens);
      t.deepEqual(g.greedy.rewards, w.greedy.rewards);
      const genLp = maxAbsDiff(g.greedy.logprobs.flat(), w.greedy.logprobs.flat());
      t.log(`generation log-probs: max diff ${genLp.max.toExponential(2)}`);
      t.true(genLp.max < 2e-4, `generation log-probs differ by ${genLp.max}`);

      // Scoring (the trainer's masked forward with the copy head).
      const scoreDiff = maxAbsDiff(g.scores.flat(), w.scores.flat());
      t.log(`scores: max diff ${scoreDiff.max.toExponential(2)}`);
      t.true(scoreDiff.max < 2e-4, `scores differ by ${scoreDiff.max}`);

      // Checkpoints: the reloaded weights save to the same bytes on both.
      t.is(w.resavedHash, w.checkpointHash);
      t.is(g.resavedHash, g.checkpointHash);
      // AddN past the storage buffers a kernel may bind (the stock webgpu kernel returned garbage).
      t.is(g.addNError, 0);
      t.is(w.addNError, 0);
      // A batch past the device's buffer limit: a clear error before any work, not an invalid kernel.
      t.regex(g.refused, /more than the webgpu backend's \d+ MiB limit/);
      t.regex(w.refused, /more than the wasm backend's 512 MiB limit/);

      // One GRPO step (KL loss to a frozen reference).
      for (const k of ['policyLoss', 'kl', 'entropy', 'gradNorm', 'actionTokens'] as const) {
        const [a, b] = [g.grpo.metrics[k] as number, w.grpo.metrics[k] as number];
        t.log(`GRPO ${k}: wasm ${b}, webgpu ${a}`);
        t.true(rel(a, b) < 1e-3 || Math.abs(a - b) < 1e-6, `GRPO ${k}: ${a} vs ${b}`);
      }
      const grpoGap = updateGap(g.grpo.weights, w.grpo.weights, w.grpo.before);
      t.log(`GRPO update: relative L2 gap ${grpoGap.toExponential(2)}`);
      t.true(grpoGap < 0.02, `GRPO updates differ by ${grpoGap}`);

      // SFT from scratch, a few steps.
      w.sft.losses.forEach((l, i) => {
        t.log(
          `SFT step ${i + 1}: loss ${l} / ${g.sft.losses[i]}, grad norm ${w.sft.gradNorms[i]} / ${g.sft.gradNorms[i]}`,
        );
        t.true(rel(g.sft.losses[i]!, l) < 1e-3, `SFT loss ${i}`);
        t.true(rel(g.sft.gradNorms[i]!, w.sft.gradNorms[i]!) < 1e-3, `SFT grad norm ${i}`);
      });
      t.is(g.sft.losses.length, job.sftSteps);
      const sftGap = updateGap(g.sft.weights, w.sft.weights, w.sft.start);
      t.log(`SFT updates: relative L2 gap ${sftGap.toExponential(2)}`);
      t.true(sftGap < 0.02, `SFT updates differ by ${sftGap}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  },
);
