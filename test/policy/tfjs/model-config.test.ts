import test from 'ava';
import { DEFAULT_MODEL_CONFIG, ModelError, parseModelConfig } from '../../../src/policy/tfjs/model-config.ts';

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
