// Run as a child process by test/architectures/lora-kernel-threads.slow.test.ts: a fresh process
// (the kernel new to V8) loads the folder, puts fixed LoRA adapters over it and prints the SHA-256
// of the decode kernel's logits on the given number of threads.
import { createHash } from 'node:crypto';
import { LLAMA_LORA_TARGETS } from '../../src/architectures/llama/config.ts';
import { initLora } from '../../src/architectures/lora.ts';
import { loadHfModel, openHfFolder } from '../../src/hf/folder.ts';
import { loraWeights } from '../../src/hf/peft.ts';
import { kernelLogits } from './kernel-logits.ts';

const [dir, threads] = process.argv.slice(2);
const { model } = await loadHfModel(await openHfFolder(dir!));
const lora = initLora(
  { rank: 8, alpha: 16, targets: [...LLAMA_LORA_TARGETS] },
  loraWeights(model.config, LLAMA_LORA_TARGETS),
  3,
);
for (const pair of lora.pairs.values()) pair.B.forEach((_, i) => (pair.B[i] = Math.sin(i + 1) * 0.2));
model.setAdapters(lora);
model.revision++;
const hash = createHash('sha256');
for (const row of await kernelLogits(model, Number(threads)))
  hash.update(new Uint8Array(row.buffer, row.byteOffset, row.byteLength));
process.stdout.write(`${hash.digest('hex')}\n`);
process.exit(0);
