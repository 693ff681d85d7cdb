import test from 'ava';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { HfTrainable, type LoraRequest } from '../../src/rl/hf-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { TRAINABLE_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';
import { readJsonl, withoutTime } from './toy.ts';

// `--resume` of a Hugging Face model is exact, as for the GPT: a run stopped after a step and resumed
// from its checkpoint (a fresh model object, as after a crash) writes the bytes an uninterrupted run
// writes: records, metrics, and the final weights (the folder, or the PEFT adapters).

let root: string;
let dir: string;
test.before(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-resume-'));
  dir = join(root, 'qwen3');
  await writeTinyFolder(dir, { ...TRAINABLE_QWEN3, seed: 5 });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

const VARIANTS: Array<[string, LoraRequest | undefined]> = [
  ['every weight', undefined],
  ['LoRA rank 4', { rank: 4, alpha: 8 }],
];
for (const [label, lora] of VARIANTS) {
  test.serial(`resume (${label}): records, metrics and final weights equal an uninterrupted run's`, async (t) => {
    const scenario = await loadScenario('calculator', builtinScenarios, {});
    const config = resolveConfig({
      algo: 'grpo',
      seed: 2,
      steps: 3,
      tasksPerStep: 2,
      group: 2,
      lr: 1e-3,
      evalEvery: 0,
      evalEpisodes: 2,
      taskPool: 4,
    });
    const episode = { maxTurns: 2, maxTokensPerTurn: 24 };
    const model = () => HfTrainable.load(dir, { id: 'resume', ...(lora ? { lora, seed: 1 } : {}) });
    const a = join(root, `${label}-whole`);
    await train({ scenario, model: await model(), config, outDir: a, episode });
    const b = join(root, `${label}-resumed`);
    const first = await train({ scenario, model: await model(), config, outDir: b, episode, stopAfter: 1 });
    t.is(first.lastStep, 1);
    const resumed = await train({ scenario, model: await model(), config, outDir: b, episode, resume: true });
    t.deepEqual(
      resumed.steps.map((s) => s.step),
      [2, 3],
    );
    t.is(await readFile(join(b, 'episodes.jsonl'), 'utf8'), await readFile(join(a, 'episodes.jsonl'), 'utf8'));
    t.deepEqual(
      withoutTime(await readJsonl(join(b, 'metrics.jsonl'))),
      withoutTime(await readJsonl(join(a, 'metrics.jsonl'))),
    );
    const files = (await readdir(join(a, 'final'))).filter((f) => f.endsWith('.safetensors'));
    t.true(files.length > 0);
    for (const f of files)
      t.true(
        (await readFile(join(b, 'final', f))).equals(await readFile(join(a, 'final', f))),
        `final/${f} is the same bytes`,
      );
  });
}
