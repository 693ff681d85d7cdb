import { LlamaDecoder, type PartLayers } from '../../src/architectures/llama/decoder.ts';
import type { LlamaModel } from '../../src/architectures/llama/model.ts';

/** Three rows of different lengths (one past a multiple of 4 and the block sizes). */
export const ROWS = [[151644, 872, 198, 9707, 11], [5], Array.from({ length: 23 }, (_, i) => 100 + i * 11)];

/** Prefill of the three rows, then one more token each: every logit, as the decode kernel gives them. */
export async function kernelLogits(
  model: LlamaModel,
  threads: number,
  parts?: readonly PartLayers[],
): Promise<Float32Array[]> {
  const decoder = new LlamaDecoder(model, { threads, parts });
  await decoder.prepare();
  const s = decoder.session(ROWS.map(() => ({ capacity: 64 })));
  try {
    const prefill = s.step(ROWS.map((tokens, slot) => ({ slot, tokens }))).map((l) => l.slice());
    const next = s.step(ROWS.map((_, slot) => ({ slot, tokens: [slot + 1] }))).map((l) => l.slice());
    return [...prefill, ...next];
  } finally {
    s.close();
  }
}
