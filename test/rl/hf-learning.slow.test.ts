import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { sequencesFromRecords } from '../../src/policy/tfjs/sft.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { HfTrainable } from '../../src/rl/hf-trainable.ts';
import { sftTrainable } from '../../src/rl/sft-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';
import type { LoraRequest } from '../../src/rl/hf-trainable.ts';

// A learning check a user can trust: a tiny model on Qwen3's real tokenizer and chat template learns
// a scenario's expert demonstrations until greedy decoding reproduces them and solves their tasks,
// and a short GRPO run from there keeps or raises that success. Template, tool-call parsing (the
// model's own syntax), masks and the trainer, end to end: training every weight, and LoRA adapters
// alone. (The LoRA base's embeddings are larger: with a frozen random embedding as the head, the
// norm-bounded final state of a std-0.1 embedding cannot put much probability on any one of 151,936
// rows, so the loss would stall near 6 whatever the adapters do.)
const VARIANTS: Array<[string, { embedStd: number; lora?: LoraRequest; steps: number; lr: number }]> = [
  ['every weight', { embedStd: 0.1, steps: 60, lr: 5e-3 }],
  ['LoRA rank 16', { embedStd: 1, lora: { rank: 16, alpha: 32 }, steps: 80, lr: 1e-2 }],
];

for (const [name, variant] of VARIANTS)
  test(`a Hugging Face model learns the calculator expert through its own template, and GRPO keeps what it learned: ${name}`, async (t) => {
    t.timeout(1_200_000);
    await initBackend('wasm');
    const root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-learning-'));
    try {
      const dir = join(root, 'qwen3');
      await writeTinyFolder(dir, {
        architecture: 'Qwen3ForCausalLM',
        hidden: 64,
        layers: 2,
        heads: 4,
        kvHeads: 2,
        headDim: 16,
        intermediate: 128,
        seed: 7,
        embedStd: variant.embedStd,
      });
      const scenario = await loadScenario('calculator', builtinScenarios, {});
      const demos = await rollout({
        scenario,
        policy: await referencePolicy(scenario, 'expert', 0),
        split: 'train',
        episodes: 8,
        seed: 1,
      });
      const trainable = await HfTrainable.load(dir, { id: 'learning', lora: variant.lora, seed: 1 });
      const sequences = sequencesFromRecords(demos.records, trainable.encoding.withTools(openAITools(scenario)));
      const sft = await sftTrainable(trainable, {
        sequences,
        steps: variant.steps,
        batchSize: 4,
        lr: variant.lr,
        seed: 1,
      });
      t.true(sft.finalLoss < 0.3, `SFT loss ${sft.finalLoss}`);
      const greedy = () =>
        rollout({ scenario, policy: trainable.policy({ temperature: 0 }), split: 'train', episodes: 8, seed: 1 });
      const learned = await greedy();
      // Greedy decoding reproduces the demonstrations, turn by turn, in the model's own format.
      learned.records.forEach((r, i) => {
        t.is(r.config.actionFormat, 'hermes');
        t.deepEqual(
          r.turns.map((turn) => turn.text),
          demos.records[i]!.turns.map((turn) => turn.text),
        );
      });
      t.is(learned.summary.successRate, 1);
      const config = resolveConfig({
        algo: 'grpo',
        seed: 1,
        steps: 2,
        tasksPerStep: 4,
        group: 4,
        lr: 1e-4,
        evalEvery: 0,
        evalEpisodes: 4,
        taskPool: 8,
      });
      await train({ scenario, model: trainable, config, outDir: join(root, 'grpo') });
      const after = await greedy();
      t.true(
        after.summary.successRate >= learned.summary.successRate,
        `success ${learned.summary.successRate} → ${after.summary.successRate}`,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
