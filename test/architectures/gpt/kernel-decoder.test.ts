import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { KernelError, MAX_STEP_TOKENS } from '../../../src/architectures/kernel/kernel-host.ts';
import { KernelDecoder } from '../../../src/architectures/gpt/kernel/kernel-decoder.ts';
import { newCache } from '../../../src/architectures/gpt/decode.ts';
import { generate } from '../../../src/policy/tfjs/generate.ts';
import { DEFAULT_MODEL_CONFIG, type ModelConfigInput } from '../../../src/architectures/gpt/model-config.ts';
import { GPTModel } from '../../../src/architectures/gpt/model.ts';
import { AdamW } from '../../../src/policy/tfjs/adamw.ts';
import { startBudget } from '../../../src/app/start.ts';

test.before(async () => {
  await initBackend('wasm');
});

/** The main job's model (src/app/start.ts, built as sft.ts builds it) and the other options tests use. */
const { model: mainModel, vocabSize: mainVocab } = startBudget(false).warmStart;
const MAIN: ModelConfigInput = { ...DEFAULT_MODEL_CONFIG, ...mainModel, vocabSize: mainVocab! };
const CONFIGS: Array<[string, ModelConfigInput]> = [
  ['main job', MAIN],
  [
    'learned positions, no token shift, copy head',
    {
      vocabSize: 50,
      dModel: 32,
      nLayers: 2,
      nHeads: 4,
      contextLength: 96,
      dMlp: 64,
      positions: 'learned',
      tokenShift: false,
      copyHead: true,
    },
  ],
  [
    'rope, token shift, no copy head',
    { vocabSize: 97, dModel: 32, nLayers: 1, nHeads: 2, contextLength: 96, dMlp: 64 },
  ],
  // Sizes that are no multiple of 4 or 8 (head 6, MLP 20, vocabulary 37): the kernels' tails.
  ['odd sizes', { vocabSize: 37, dModel: 12, nLayers: 2, nHeads: 2, contextLength: 96, dMlp: 20, copyHead: true }],
];

/** A model whose distributions are not near-uniform, with every optional part switched on and non-zero. */
function sharpModel(config: ModelConfigInput, seed = 3): GPTModel {
  const model = new GPTModel(config, seed);
  tf.tidy(() => {
    model.tokEmb.assign(model.tokEmb.mul(8));
    if (model.shiftGate) model.shiftGate.assign(tf.randomNormal(model.shiftGate.shape, 0, 1, 'float32', 5));
    if (model.copy) {
      model.copy.gateB.assign(tf.tensor1d([0.4]));
      model.copy.wq.assign(model.copy.wq.mul(20));
    }
  });
  return model;
}

const seqOf = (n: number, salt: number, V: number) => Array.from({ length: n }, (_, j) => (j * 31 + salt * 17 + 3) % V);

for (const [name, config] of CONFIGS) {
  test(`kernel steps equal the tfjs full forward within 1e-5 (${name})`, async (t) => {
    const model = sharpModel(config);
    const V = model.config.vocabSize;
    const seq = seqOf(40, 1, V);
    const input = tf.tensor2d([seq], [1, seq.length], 'int32');
    const { logits, values } = model.forward(input);
    const full = logits.arraySync()[0]!;
    tf.dispose([input, logits, values]);
    const decoder = KernelDecoder.for(model);
    await decoder.prepare();
    const session = decoder.session([{ capacity: 40 }]);
    let d = 0;
    const cmp = (got: Float32Array, at: number) =>
      got.forEach((x, v) => (d = Math.max(d, Math.abs(x - full[at]![v]!))));
    try {
      cmp(session.step([{ slot: 0, tokens: seq.slice(0, 17) }])[0]!, 16);
      for (let i = 17; i < 40; i++) cmp(session.step([{ slot: 0, tokens: [seq[i]!], prevToken: seq[i - 1] }])[0]!, i);
    } finally {
      session.close();
    }
    t.true(d <= 1e-5, `max |kernel − forward| = ${d}`);
    model.dispose();
  });

  test(`a row's kernel logits are the same bits alone and in batches of 2, 16 and 64 of other lengths (${name})`, async (t) => {
    const model = sharpModel(config);
    const V = model.config.vocabSize;
    const decoder = KernelDecoder.for(model);
    await decoder.prepare();
    const target = seqOf(29, 0, V);
    // Prefill 21 tokens, then one step of 3, then 5 single-token steps: logits of every step.
    const plan = [21, 3, 1, 1, 1, 1, 1];
    const run = (batch: number): Float32Array[] => {
      const others = Array.from({ length: batch - 1 }, (_, i) => seqOf(60, i + 2, V).slice(0, 1 + ((i * 13) % 59)));
      const at = Math.floor(batch / 2); // the target sits among the others
      const rows = [...others.slice(0, at), target, ...others.slice(at)];
      const session = decoder.session(rows.map((r) => ({ capacity: r.length + 40 })));
      const fed = rows.map(() => 0);
      const out: Float32Array[] = [];
      try {
        for (const n of plan) {
          // Each other row feeds a different number of tokens than the target (1 to 4, while it has any).
          const steps = rows.flatMap((r, slot) => {
            const take = slot === at ? n : 1 + ((slot + fed[slot]!) % 4);
            const tokens = r.slice(fed[slot], fed[slot]! + take);
            if (tokens.length === 0) return [];
            const prev = fed[slot]! > 0 ? { prevToken: r[fed[slot]! - 1]! } : {};
            fed[slot]! += tokens.length;
            return [{ slot, tokens, ...prev }];
          });
          const logits = session.step(steps);
          out.push(logits[steps.findIndex((s) => s.slot === at)]!.slice());
        }
      } finally {
        session.close();
      }
      return out;
    };
    const alone = run(1);
    for (const batch of [2, 16, 64]) {
      const together = run(batch);
      together.forEach((l, s) => t.deepEqual(Array.from(l), Array.from(alone[s]!), `batch ${batch}, step ${s}`));
    }
    model.dispose();
  });
}

test('a step of more than MAX_STEP_TOKENS new tokens runs in parts and gives the same bits as rows alone', async (t) => {
  const model = sharpModel({ ...MAIN, nLayers: 1 });
  const V = model.config.vocabSize;
  const decoder = KernelDecoder.for(model);
  await decoder.prepare();
  const rows = Array.from({ length: Math.ceil(MAX_STEP_TOKENS / 700) + 1 }, (_, i) => seqOf(700, i, V));
  t.true(rows.length * 700 > MAX_STEP_TOKENS);
  const once = (rs: number[][]) => {
    const s = decoder.session(rs.map((r) => ({ capacity: r.length })));
    try {
      return s.step(rs.map((tokens, slot) => ({ slot, tokens }))).map((l) => Array.from(l));
    } finally {
      s.close();
    }
  };
  const together = once(rows);
  rows.forEach((r, i) => t.deepEqual(together[i], once([r])[0]));
  model.dispose();
});

test('caches go in and out of the kernel unchanged: a later turn on an exported cache gives the same bits as one session', async (t) => {
  const model = sharpModel(CONFIGS[1]![1]);
  const V = model.config.vocabSize;
  const decoder = KernelDecoder.for(model);
  await decoder.prepare();
  const seq = seqOf(30, 4, V);
  const one = decoder.session([{ capacity: 30 }]);
  const first = Array.from(one.step([{ slot: 0, tokens: seq.slice(0, 20) }])[0]!);
  const direct = Array.from(one.step([{ slot: 0, tokens: seq.slice(20), prevToken: seq[19] }])[0]!);
  const exported = one.exportCache(0);
  one.close();
  t.is(exported.length, 30);
  t.deepEqual([...exported.ids.subarray(0, 30)], seq);

  const a = decoder.session([{ capacity: 20 }]);
  t.deepEqual(Array.from(a.step([{ slot: 0, tokens: seq.slice(0, 20) }])[0]!), first);
  const cache = a.exportCache(0);
  a.close();
  const b = decoder.session([{ cache, capacity: 30 }]);
  t.is(b.length(0), 20);
  t.deepEqual(Array.from(b.step([{ slot: 0, tokens: seq.slice(20), prevToken: seq[19] }])[0]!), direct);
  const again = newCache(model);
  b.writeCache(0, again);
  b.close();
  t.is(again.length, 30);
  for (let l = 0; l < model.config.nLayers; l++) {
    t.deepEqual(again.k[l]!.subarray(0, 30 * 32), exported.k[l]!.subarray(0, 30 * 32));
    t.deepEqual(again.v[l]!.subarray(0, 30 * 32), exported.v[l]!.subarray(0, 30 * 32));
  }
  t.deepEqual(again.copyKeys.subarray(0, 30 * 32), exported.copyKeys.subarray(0, 30 * 32));
  model.dispose();
});

test('the weights are copied in once per version: again only after they change, and the logits follow them', async (t) => {
  const model = sharpModel(CONFIGS[2]![1]);
  const V = model.config.vocabSize;
  const decoder = KernelDecoder.for(model);
  const rows = [{ tokens: seqOf(12, 1, V), seed: 1, maxTokens: 4 }];
  const opts = { returnLogits: true, sampling: { temperature: 0 } } as const;
  const before = await generate(model, rows, opts);
  await generate(model, rows, opts);
  await generate(model, rows, opts);
  t.is(decoder.weightLoads, 1);
  // One optimizer step (what the trainer does between rollouts).
  const optimizer = new AdamW(model.trainableVariables, { lr: 0.05 });
  const input = tf.tensor2d([rows[0]!.tokens], [1, 12], 'int32');
  await optimizer.minimize(() => tf.tidy(() => model.forward(input).logits.mean() as tf.Scalar));
  input.dispose();
  const after = await generate(model, rows, opts);
  t.is(decoder.weightLoads, 2);
  await generate(model, rows, opts);
  t.is(decoder.weightLoads, 2);
  t.notDeepEqual(Array.from(after[0]!.logits![0]!), Array.from(before[0]!.logits![0]!));
  const full = tf.tidy(
    () => model.forward(tf.tensor2d([rows[0]!.tokens], [1, 12], 'int32')).logits.arraySync()[0]![11]!,
  );
  let d = 0;
  after[0]!.logits![0]!.forEach((x, v) => (d = Math.max(d, Math.abs(x - full[v]!))));
  t.true(d <= 1e-5, `max |kernel − forward| after the update = ${d}`);
  model.dispose();
});

test('bad steps and sessions are refused by name', async (t) => {
  const model = sharpModel(CONFIGS[2]![1]);
  const decoder = KernelDecoder.for(model);
  t.throws(() => decoder.session([{ capacity: 4 }]), { instanceOf: KernelError, message: /prepare/ });
  await decoder.prepare();
  const s = decoder.session([{ capacity: 4 }, { capacity: 200 }]);
  t.throws(() => decoder.session([{ capacity: 4 }]), { instanceOf: KernelError, message: /already open/ });
  t.throws(() => s.step([{ slot: 0, tokens: [] }]), { instanceOf: KernelError, message: /no new tokens/ });
  t.throws(() => s.step([{ slot: 0, tokens: [1, 97] }]), { instanceOf: KernelError, message: /token id 97 is not in/ });
  t.throws(() => s.step([{ slot: 0, tokens: [1], prevToken: -1 }]), {
    instanceOf: KernelError,
    message: /token id -1/,
  });
  t.throws(() => s.step([{ slot: 0, tokens: [1, 2, 3, 4, 5] }]), {
    instanceOf: KernelError,
    message: /exceed its room/,
  });
  t.throws(() => s.step([{ slot: 1, tokens: seqOf(97, 1, 97) }]), {
    instanceOf: KernelError,
    message: /exceed the context/,
  });
  t.throws(() => s.step([{ slot: 2, tokens: [1] }]), { instanceOf: KernelError, message: /no slot 2/ });
  t.throws(
    () =>
      s.step([
        { slot: 0, tokens: [1] },
        { slot: 0, tokens: [2] },
      ]),
    { instanceOf: KernelError, message: /slot 0 twice/ },
  );
  s.close();
  t.throws(() => s.step([{ slot: 0, tokens: [1] }]), { instanceOf: KernelError, message: /closed/ });
  const other = new GPTModel({ ...CONFIGS[2]![1], dModel: 16 }, 1);
  t.throws(() => decoder.session([{ cache: newCache(other), capacity: 4 }]), {
    instanceOf: KernelError,
    message: /another model shape/,
  });
  // A refused session leaves the decoder usable.
  const again = decoder.session([{ capacity: 4 }]);
  t.is(again.step([{ slot: 0, tokens: [1, 2] }])[0]!.length, 97);
  again.close();
  other.dispose();
  model.dispose();
});
