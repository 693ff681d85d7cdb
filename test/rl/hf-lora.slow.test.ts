import test from 'ava';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import { openModel } from '../../src/app/models.ts';
import { resolvePolicy } from '../../src/app/resolve-policy.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { sequencesFromRecords } from '../../src/policy/tfjs/sft.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { HfTrainable } from '../../src/rl/hf-trainable.ts';
import { sftTrainable } from '../../src/rl/sft-trainable.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { TRAINABLE_QWEN3, writeTinyFolder, type TinyFolder } from '../helpers/hf-folder.ts';

let root: string;
let dir: string;
const SPEC: TinyFolder = { ...TRAINABLE_QWEN3, seed: 21 };
test.before(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-lora-'));
  dir = join(root, 'base');
  await writeTinyFolder(dir, SPEC);
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

/** The trainer's log-probs of each record's sampled tokens against the sampler's: the largest gap. */
async function samplerTrainerGap(trainable: HfTrainable, records: EpisodeRecord[]): Promise<[number, number]> {
  let worst = 0;
  let compared = 0;
  for (const record of records) {
    const tokens = [...record.promptTokens!];
    const mask = tokens.map(() => 0);
    const sampled: number[] = [];
    for (const turn of record.turns) {
      for (const [i, id] of turn.tokens!.entries()) {
        tokens.push(id);
        mask.push(1);
        sampled.push(turn.logprobs![i]!);
      }
      for (const id of turn.observationTokens ?? []) {
        tokens.push(id);
        mask.push(0);
      }
    }
    const { logprobs } = trainable.score({ tokens: [tokens], length: tokens.length, mask: [mask] });
    const data = await logprobs.data();
    logprobs.dispose();
    let k = 0;
    mask.forEach((m, i) => {
      if (!m) return;
      worst = Math.max(worst, Math.abs(data[i]! - sampled[k++]!));
      compared++;
    });
  }
  return [worst, compared];
}

test('LoRA: only the adapters train, the base stays as it was; the sampler (merged weights) and the trainer agree within 1e-5; the checkpoint is PEFT adapters naming the base, which ckpt:DIR, export and resume read back', async (t) => {
  const scenario = await loadScenario('calculator', builtinScenarios, {});
  const trainable = await HfTrainable.load(dir, { id: 'lora', lora: { rank: 4, alpha: 8 }, seed: 3 });
  const base = await loadHfModel(await openHfFolder(dir));
  t.is(trainable.version(), base.hash, 'B starts at zero: the model is the base, bit for bit');
  // Two layers × seven projections × (A, B); no weight of the base is trainable.
  t.is(trainable.variables.length, 28);
  t.true([...trainable.net.variables.values()].every((v) => !v.trainable));
  const qProj = 'model.layers.0.self_attn.q_proj.weight';
  t.deepEqual(trainable.net.adapters.get(qProj)!.A.shape, [4, 32]);
  t.deepEqual(trainable.net.adapters.get(qProj)!.B.shape, [32, 4]);

  const { records: demos } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 0),
    split: 'train',
    episodes: 2,
    seed: 1,
  });
  const sequences = sequencesFromRecords(demos, trainable.encoding.withTools(openAITools(scenario)));
  const losses: number[] = [];
  await sftTrainable(trainable, {
    sequences,
    steps: 4,
    batchSize: 2,
    lr: 2e-2,
    seed: 1,
    onStep: (s) => losses.push(s.loss),
  });
  t.true(losses.at(-1)! < losses[0]!, `loss ${losses[0]} → ${losses.at(-1)}`);
  t.not(trainable.version(), base.hash, 'the adapters moved, and so did the version');
  // On the wasm backend the frozen base is not a tensor: the linear kernel keeps it.
  t.false(trainable.net.variables.has(qProj));
  t.deepEqual(trainable.net.linear!.values(qProj), base.model.weight(qProj), 'the base is frozen');
  t.notDeepEqual(trainable.model.weight(qProj), base.model.weight(qProj), 'the sampler reads merged weights');
  // The layer norms are not adapted: the model keeps the base's.
  t.deepEqual(trainable.model.weight('model.norm.weight'), base.model.weight('model.norm.weight'));

  const { records } = await rollout({
    scenario,
    policy: trainable.policy({ temperature: 1 }),
    split: 'train',
    episodes: 3,
    seed: 4,
    config: { actionFormat: 'tags', maxTurns: 3, maxTokensPerTurn: 10 },
  });
  const [gap, compared] = await samplerTrainerGap(trainable, records);
  t.true(gap < 1e-5 && compared >= 30, `largest gap ${gap} over ${compared} tokens`);

  // The frozen reference shares the base and copies the adapters: it scores as the policy did when frozen.
  const ref = await trainable.freeze();
  const probe = { tokens: [records[0]!.promptTokens!.slice(0, 40)], length: 40 };
  const [a, b] = [trainable.score(probe).logprobs, ref.score(probe).logprobs];
  t.deepEqual(await a.data(), await b.data());
  a.dispose();
  b.dispose();
  ref.dispose();

  const out = join(root, 'ckpt');
  await trainable.save(out);
  t.deepEqual((await readdir(out)).sort(), ['adapter_config.json', 'adapter_model.safetensors', 'checkpoint.json']);
  const json = JSON.parse(await readFile(join(out, 'checkpoint.json'), 'utf8'));
  t.deepEqual(json.base, { dir: resolve(dir), hash: base.hash });
  t.is(json.hash, trainable.version());
  t.like(JSON.parse(await readFile(join(out, 'adapter_config.json'), 'utf8')), {
    peft_type: 'LORA',
    r: 4,
    lora_alpha: 8,
    target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
  });

  // ckpt:DIR plays the merged model; model export writes it merged, as a folder that hashes alike.
  const policy = await resolvePolicy(`ckpt:${out}`, scenario, 0);
  t.is(policy.version, trainable.version());
  const exported = join(root, 'exported');
  await (await openModel(`ckpt:${out}`)).export('hf', exported);
  t.is((await loadHfModel(await openHfFolder(exported))).hash, trainable.version());

  // Resume: a run with fresh adapters (another seed) takes the checkpoint's, and computes the same model.
  const resumed = await HfTrainable.load(dir, { lora: { rank: 4, alpha: 8 }, seed: 99 });
  await resumed.load(out);
  t.is(resumed.version(), trainable.version());
  // Continuing from the checkpoint trains its adapters; asking for other ones is refused.
  const continued = await HfTrainable.load(out);
  t.is(continued.version(), trainable.version());
  t.deepEqual(continued.lora, trainable.lora);
  await t.throwsAsync(HfTrainable.load(out, { lora: { rank: 8, alpha: 16 } }), {
    instanceOf: TrainingError,
    message: /rank-4 adapters.*--lora 8/,
  });
  // A full fine-tuning run cannot take adapters, nor a LoRA run another rank's or another base's.
  const full = await HfTrainable.load(dir);
  await t.throwsAsync(full.load(out), { instanceOf: TrainingError, message: /holds LoRA adapters/ });
  const rank2 = await HfTrainable.load(dir, { lora: { rank: 2, alpha: 8 } });
  await t.throwsAsync(rank2.load(out), { instanceOf: TrainingError, message: /rank-4 adapters.*rank 2/ });
  const otherDir = join(root, 'other-base');
  await writeTinyFolder(otherDir, { ...SPEC, seed: 22 });
  const other = await HfTrainable.load(otherDir, { lora: { rank: 4, alpha: 8 } });
  await t.throwsAsync(other.load(out), { instanceOf: TrainingError, message: /another base model/ });
  for (const x of [trainable, resumed, continued, full, rank2, other]) x.net.dispose();
});
