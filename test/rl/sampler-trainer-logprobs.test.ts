import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { createRng } from '../../src/core/rng.ts';
import type { PolicyRequest } from '../../src/policy/policy.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { defaultDecoder } from '../../src/policy/tfjs/generate.ts';
import { DEFAULT_MODEL_CONFIG } from '../../src/architectures/gpt/model-config.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import type { TfjsPolicy } from '../../src/policy/tfjs/tfjs-policy.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { startBudget } from '../../src/app/start.ts';
import { ppoPolicyLoss } from '../../src/rl/losses.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';

/**
 * The sampler's recorded log-probs (the decode kernel, through the policy the trainer hands to
 * rollouts, over multi-turn episodes that reuse each episode's KV cache) against the trainer's
 * recomputation (the tfjs full forward, GptTrainable.score with the action mask), on the main job's
 * model: within 1e-5, so the PPO ratio of an on-policy step is 1 within that.
 */
const TOLERANCE = 1e-5;

const rng = createRng(11);
const letters = 'abcdefghijklmnopqrstuvwxyz';
const word = () =>
  Array.from({ length: 2 + Math.floor(rng.next() * 6) }, () => letters[Math.floor(rng.next() * 26)]).join('');
const corpus = Array.from({ length: 400 }, () => Array.from({ length: 12 }, word).join(' '));
const { model: mainModel, vocabSize } = startBudget(false).warmStart;
const tokenizer = trainTokenizer(corpus, { vocabSize: vocabSize!, chunking: 'words' });

interface Episode {
  tokens: number[];
  mask: number[];
  sampled: number[];
}

test('the sampler’s log-probs equal the trainer’s within 1e-5 on the main job’s model; the on-policy PPO ratio is 1 within that', async (t) => {
  await initBackend('wasm');
  t.is(defaultDecoder(), 'kernel');
  const config = { ...DEFAULT_MODEL_CONFIG, ...mainModel, vocabSize: tokenizer.vocabSize };
  t.deepEqual([config.dModel, config.nLayers, config.contextLength, config.copyHead], [64, 2, 768, true]);
  t.is(config.vocabSize, vocabSize!);
  const model = new GPTModel(config, 5);
  // Peaked distributions, as a trained policy has (random init is near uniform), and every part on.
  tf.tidy(() => {
    model.tokEmb.assign(model.tokEmb.mul(10));
    model.shiftGate!.assign(tf.randomNormal([config.dModel], 0, 1, 'float32', 2));
    model.copy!.gateB.assign(tf.tensor1d([0.5]));
    model.copy!.wq.assign(model.copy!.wq.mul(20));
    for (const l of model.layers) l.wq.assign(l.wq.mul(4));
  });
  const trainable = await GptTrainable.create(model, tokenizer);
  const policy = trainable.policy({ temperature: 1 }) as TfjsPolicy;

  // 8 episodes × 4 turns, played in one batch per turn: prompts of different lengths, observations between turns.
  const episodes: Episode[] = Array.from({ length: 8 }, (_, e) => {
    const prompt = tokenizer.encode(corpus.slice(e * 7, e * 7 + 1 + (e % 4)).join(' '));
    return { tokens: prompt, mask: prompt.map(() => 0), sampled: prompt.map(() => 0) };
  });
  for (let turn = 0; turn < 4; turn++) {
    const requests: PolicyRequest[] = episodes.map((ep, e) => ({
      episodeId: `ep-${e}`,
      task: { id: `t${e}`, split: 'train', question: '' },
      tools: [],
      messages: [],
      tokens: ep.tokens.slice(),
      turn,
      seed: 1000 * e + turn,
      maxTokens: 24,
    }));
    const outs = await policy.actBatch(requests);
    outs.forEach((out, e) => {
      const ep = episodes[e]!;
      ep.tokens.push(...out.tokens!);
      ep.mask.push(...out.tokens!.map(() => 1));
      ep.sampled.push(...out.logprobs!);
      if (turn === 3) return;
      const observation = tokenizer.encode(
        corpus[100 + e * 4 + turn]!.split(' ')
          .slice(0, 4 + e)
          .join(' '),
      );
      ep.tokens.push(...observation);
      ep.mask.push(...observation.map(() => 0));
      ep.sampled.push(...observation.map(() => 0));
    });
  }
  t.true(policy.cachedBytes > 0, 'turns after the first reused their episode caches');
  const actions = episodes.reduce((n, ep) => n + ep.mask.reduce((a, b) => a + b, 0), 0);
  t.true(actions > 8 * 4, `${actions} action tokens`);

  const length = Math.max(...episodes.map((ep) => ep.tokens.length));
  t.true(length > 300, `episodes up to ${length} tokens`);
  const scored = trainable.score({
    tokens: episodes.map((ep) => ep.tokens),
    mask: episodes.map((ep) => ep.mask),
    length,
    temperature: 1,
  });
  const recomputed = scored.logprobs.arraySync();
  let maxDiff = 0;
  let spread = 0;
  episodes.forEach((ep, e) =>
    ep.mask.forEach((m, i) => {
      if (!m) return;
      maxDiff = Math.max(maxDiff, Math.abs(ep.sampled[i]! - recomputed[e]![i]!));
      spread = Math.max(spread, Math.abs(ep.sampled[i]!));
    }),
  );
  t.true(spread > 1, `the log-probs are not all near 0 (largest |logπ| ${spread})`);
  t.log(`max diff ${maxDiff}, spread ${spread}, length ${length}, actions ${actions}`);
  t.true(maxDiff <= TOLERANCE, `max |sampler − trainer| = ${maxDiff}`);

  // The PPO surrogate (losses.ts) with the sampler's log-probs as the old ones: ratio 1 within the tolerance.
  const old = tf.tensor2d(episodes.map((ep) => [...ep.sampled, ...Array(length - ep.tokens.length).fill(0)]));
  const mask = tf.tensor2d(episodes.map((ep) => [...ep.mask, ...Array(length - ep.tokens.length).fill(0)]));
  const advantages = tf.tidy(() => tf.randomNormal([episodes.length, length], 0, 1, 'float32', 4).mul(mask));
  const ratio = tf.tidy(() => tf.exp(scored.logprobs.sub(old)).sub(1).abs().mul(mask).max().dataSync()[0]!);
  t.true(ratio <= 1.0001 * TOLERANCE, `max |ratio − 1| = ${ratio}`);
  const loss = ppoPolicyLoss({ logprobs: scored.logprobs, oldLogprobs: old, advantages, mask });
  t.is(loss.clipFraction.dataSync()[0], 0);
  // At ratio 1 the token-mean surrogate is −mean(A) over the action tokens.
  const atOne = tf.tidy(() => advantages.mul(mask).sum().neg().div(mask.sum()).dataSync()[0]!);
  t.true(Math.abs(loss.loss.dataSync()[0]! - atOne) <= TOLERANCE, `${loss.loss.dataSync()[0]} vs ${atOne}`);
  tf.dispose([
    scored.logprobs,
    old,
    mask,
    advantages,
    loss.loss,
    loss.clipFraction,
    loss.dualClipFraction,
    loss.approxKl,
  ]);
  model.dispose();
});
