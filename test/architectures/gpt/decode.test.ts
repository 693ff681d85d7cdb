import test from 'ava';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../../../src/policy/tfjs/backend.ts';
import { forwardRows, newCache } from '../../../src/architectures/gpt/decode.ts';
import { ModelError } from '../../../src/architectures/gpt/model-config.ts';
import { GPTModel } from '../../../src/architectures/gpt/model.ts';

test.before(async () => {
  await initBackend('wasm');
});

const seq = [3, 9, 4, 4, 17, 2, 8, 30, 5, 11];

for (const positions of ['rope', 'learned'] as const) {
  test(`incremental rows equal the full forward pass (${positions} positions, token shift)`, async (t) => {
    const config = { vocabSize: 32, dModel: 16, nLayers: 2, nHeads: 2, contextLength: 16, dMlp: 32, positions };
    const model = new GPTModel(config, 4);
    tf.tidy(() => model.shiftGate!.assign(tf.randomNormal([16], 0, 1, 'float32', 5)));
    const input = tf.tensor2d([seq], [1, seq.length], 'int32');
    const { logits, values } = model.forward(input);
    const full = logits.arraySync()[0]!;
    tf.dispose([input, logits, values]);
    const cache = newCache(model, 1);
    let d = 0;
    const cmp = (got: tf.Tensor2D, at: number) => {
      got.arraySync()[0]!.forEach((x, v) => (d = Math.max(d, Math.abs(x - full[at]![v]!))));
      got.dispose();
    };
    cmp(await forwardRows(model, [{ tokens: seq.slice(0, 4), cache }]), 3);
    for (let i = 4; i < seq.length; i++) {
      cmp(await forwardRows(model, [{ tokens: [seq[i]!], cache, prevToken: seq[i - 1] }]), i);
    }
    t.true(d < 1e-5, `max diff ${d}`);
    t.is(cache.length, seq.length);
    model.dispose();
  });
}

test('a row decodes to the same bits alone and in a batch; bad rows are refused by name', async (t) => {
  const model = new GPTModel({ vocabSize: 32, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 8, dMlp: 32 }, 6);
  const alone = await forwardRows(model, [{ tokens: seq.slice(0, 5), cache: newCache(model) }]);
  const batch = await forwardRows(model, [
    { tokens: [1, 2], cache: newCache(model) },
    { tokens: seq.slice(0, 5), cache: newCache(model) },
    { tokens: [7], cache: newCache(model) },
  ]);
  t.deepEqual(Array.from(batch.dataSync().subarray(32, 64)), Array.from(alone.dataSync()));
  tf.dispose([alone, batch]);
  const refused = (tokens: number[], message: RegExp, m = model) =>
    t.throwsAsync(forwardRows(model, [{ tokens, cache: newCache(m) }]), { instanceOf: ModelError, message });
  await refused([], /no new tokens/);
  await refused(seq, /exceed the context/);
  const other = new GPTModel({ vocabSize: 32, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 8, dMlp: 32 }, 6);
  await refused([1], /another model shape/, other);
  model.dispose();
  other.dispose();
});
