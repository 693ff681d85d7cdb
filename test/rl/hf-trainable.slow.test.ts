import test from 'ava';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinScenarios } from '../../scenarios/index.ts';
import { openModel } from '../../src/app/models.ts';
import { resolvePolicy } from '../../src/app/resolve-policy.ts';
import type { Message } from '../../src/core/types.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { sequencesFromRecords } from '../../src/policy/tfjs/sft.ts';
import { TrainingError } from '../../src/rl/errors.ts';
import { checkFullFineTuningFits, HfTrainable } from '../../src/rl/hf-trainable.ts';
import { sftTrainable } from '../../src/rl/sft-trainable.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import { loadScenario } from '../../src/scenario/load.ts';
import { referencePolicy } from '../../src/scenario/reference-policy.ts';
import { TRAINABLE_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

let root: string;
let dir: string;
test.before(async () => {
  await initBackend('wasm');
  root = await mkdtemp(join(tmpdir(), 'agent-r1-hf-trainable-'));
  dir = join(root, 'qwen3');
  await writeTinyFolder(dir, { ...TRAINABLE_QWEN3, seed: 21 });
});
test.after.always(async () => {
  await rm(root, { recursive: true, force: true });
});

test("the sampler's log-probs (the decode kernel, over multi-turn episodes) equal the trainer's (the tfjs forward) within 1e-5", async (t) => {
  const trainable = await HfTrainable.load(dir);
  const scenario = await loadScenario('calculator', builtinScenarios, {});
  const policy = trainable.policy({ temperature: 1 });
  const { records } = await rollout({
    scenario,
    policy,
    split: 'train',
    episodes: 3,
    seed: 4,
    config: { actionFormat: 'tags', maxTurns: 3, maxTokensPerTurn: 10 },
  });
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
      t.true(Math.abs(data[i]! - sampled[k]!) < 1e-5, `${record.episodeId} token ${i}: ${data[i]} vs ${sampled[k]}`);
      k++;
      compared++;
    });
  }
  t.true(compared >= 60, `${compared} tokens compared`);
  trainable.net.dispose();
});

test('SFT on demonstrations in the template lowers the loss on the assistant tokens; the checkpoint is a Hugging Face folder that ckpt:DIR, model export and another load read as it was', async (t) => {
  const trainable = await HfTrainable.load(dir, { id: 'sft' });
  const base = trainable.version();
  const scenario = await loadScenario('calculator', builtinScenarios, {});
  const { records } = await rollout({
    scenario,
    policy: await referencePolicy(scenario, 'expert', 0),
    split: 'train',
    episodes: 2,
    seed: 1,
  });
  const encoding = trainable.encoding.withTools(openAITools(scenario));
  const sequences = sequencesFromRecords(records, encoding);
  // The mask covers exactly the assistant's tokens: each action's ids and its end of turn, nothing of the template.
  const first = sequences[0]!;
  const masked = first.tokens.filter((_, i) => first.mask[i]);
  const actions = records[0]!.turns.flatMap((turn) => encoding.action(turn.text));
  t.deepEqual(masked, actions);
  t.is(trainable.encoding.turnEnd, 151645);
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
  t.not(trainable.version(), base, 'the weights changed, and so did the version');
  const out = join(root, 'ckpt');
  await trainable.save(out);
  const reread = await loadHfModel(await openHfFolder(out));
  t.is(reread.hash, trainable.version());
  const policy = await resolvePolicy(`ckpt:${out}`, scenario, 0);
  t.is(policy.version, trainable.version());
  t.is(policy.id, `ckpt:${out}`);
  const json = JSON.parse(await readFile(join(out, 'checkpoint.json'), 'utf8'));
  t.like(json, { format: 'agent-r1-hf', version: 1, hash: trainable.version() });
  // What the checkpoint generates is what the trained weights generate.
  const messages: Message[] = [{ role: 'user', content: 'What is 3 + 4?' }];
  const request = {
    episodeId: 'e',
    task: { id: 't', split: 'train', question: 'q' },
    tools: [],
    messages,
    turn: 0,
    seed: 3,
    maxTokens: 5,
  };
  t.deepEqual(await policy.act(request), await trainable.policy({ temperature: 1 }).act(request));
  // `model export` of the checkpoint writes the same weights.
  const exported = join(root, 'exported');
  await (await openModel(`ckpt:${out}`)).export('hf', exported);
  t.true((await readFile(join(exported, 'model.safetensors'))).equals(await readFile(join(out, 'model.safetensors'))));
  trainable.net.dispose();
});

test("full fine-tuning that cannot fit the wasm backend's heap is refused before it starts, naming LoRA; on a GPU backend, or small enough, it goes on", (t) => {
  // Qwen3-0.6B: 596M parameters × 4 copies × 4 bytes.
  t.throws(() => checkFullFineTuningFits(596_049_920, 'wasm', '/models/Qwen3-0.6B'), {
    instanceOf: TrainingError,
    message:
      "training every weight of /models/Qwen3-0.6B (596M parameters) needs 9.5 GB for the weights, their gradients and AdamW's moments; the wasm backend's 4 GiB heap holds that for about 67M parameters: train LoRA adapters (--lora 8), or use a GPU backend (--backend tensorflow-gpu or webgpu)",
  });
  t.notThrows(() => checkFullFineTuningFits(596_049_920, 'tensorflow', '/models/Qwen3-0.6B'));
  t.throws(() => checkFullFineTuningFits(134_515_008, 'wasm', '/models/SmolLM2-135M'), { instanceOf: TrainingError });
  t.notThrows(() => checkFullFineTuningFits(9_810_368, 'wasm', '/models/tiny'));
});
