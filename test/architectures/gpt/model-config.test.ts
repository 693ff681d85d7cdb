import test from 'ava';
import {
  DEFAULT_MODEL_CONFIG,
  MODEL_LIMITS,
  ModelError,
  parseModelConfig,
} from '../../../src/architectures/gpt/model-config.ts';

test('a config gets its defaults; a bad one is a clear error', (t) => {
  const c = parseModelConfig({ vocabSize: 10, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 4, dMlp: 8 });
  t.deepEqual([c.positions, c.tokenShift, c.copyHead], ['rope', true, false]);
  t.deepEqual(parseModelConfig({ ...DEFAULT_MODEL_CONFIG, vocabSize: 32 }), { ...DEFAULT_MODEL_CONFIG, vocabSize: 32 });
  t.throws(() => parseModelConfig({ vocabSize: 10, dModel: 10, nLayers: 1, nHeads: 3, contextLength: 8, dMlp: 8 }), {
    instanceOf: ModelError,
    message: /divisible/,
  });
  t.throws(() => parseModelConfig({ vocabSize: 10 }), { instanceOf: ModelError, message: /bad model config: dModel/ });
  const alibi = { ...DEFAULT_MODEL_CONFIG, vocabSize: 10, positions: 'alibi' };
  t.throws(() => parseModelConfig(alibi), { instanceOf: ModelError, message: /positions/ });
});

test('every size field is bounded, and so is what the fields make together', (t) => {
  const ok = { vocabSize: 64, dModel: 64, nLayers: 2, nHeads: 4, contextLength: 512, dMlp: 256 };
  for (const [field, value] of Object.entries(MODEL_LIMITS)) {
    t.throws(() => parseModelConfig({ ...ok, [field]: value + 1 }), {
      instanceOf: ModelError,
      message: new RegExp(field),
    });
  }
  // Each within its bound, but together tens of GiB (the rotary tables alone 2 × 2^17 × 2^14 floats).
  t.throws(() => parseModelConfig({ ...ok, contextLength: MODEL_LIMITS.contextLength, dModel: MODEL_LIMITS.dModel }), {
    instanceOf: ModelError,
    message: /float32 values \(\d+\.\d GiB\) when built; the most is 4\.0 GiB/,
  });
  t.throws(() => parseModelConfig({ ...ok, dModel: 12, nHeads: 4 }), {
    instanceOf: ModelError,
    message: /even head size/,
  });
});
