import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { llamaWeights } from '../architectures/llama/config.ts';
import { ggufHyperparameters, ggufTensors } from '../architectures/llama/gguf.ts';
import type { LlamaModel } from '../architectures/llama/model.ts';
import type { FloatDtype } from '../formats/dtype.ts';
import { writeGguf } from '../formats/gguf.ts';
import { writeSafetensors } from '../formats/safetensors.ts';
import type { HfChat } from './folder.ts';
import { ggufVocabulary } from './gguf-vocab.ts';
import { readJsonFile } from './read-json.ts';

/** The files of a folder that go with its weights to an export, as they are. */
const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'generation_config.json',
  'chat_template.jinja',
];

const TORCH_DTYPE: { readonly [D in FloatDtype]: string } = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' };

/**
 * A model as a Hugging Face folder Transformers (and vLLM) loads: the source's config.json (its
 * dtype set to the export's), its tokenizer files and template as they are, and model.safetensors
 * with every weight in `dtype`. Exported in the source's dtype, the weights are the source's bits.
 */
export async function exportHf(source: HfChat, model: LlamaModel, out: string, dtype: FloatDtype): Promise<void> {
  await mkdir(out, { recursive: true });
  const config = (await readJsonFile(join(source.dir, 'config.json'), 1 << 20))!;
  if ('dtype' in config) config.dtype = TORCH_DTYPE[dtype];
  else config.torch_dtype = TORCH_DTYPE[dtype];
  for (const file of TOKENIZER_FILES) {
    await copyFile(join(source.dir, file), join(out, file)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  }
  await writeSafetensors(
    join(out, 'model.safetensors'),
    llamaWeights(model.config).map(({ name, shape }) => ({ name, shape, dtype, values: () => model.weight(name) })),
  );
  await writeFile(join(out, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
}

/**
 * A model as one GGUF file llama.cpp (and Ollama, LM Studio) loads: its hyperparameters, its
 * tokenizer as a `gpt2` vocabulary with the template, and its tensors, matrices in `dtype`.
 */
export async function exportGguf(source: HfChat, model: LlamaModel, out: string, dtype: FloatDtype): Promise<void> {
  const name = basename(resolve(source.dir));
  await writeGguf(
    out,
    [
      ...ggufHyperparameters(model.config, name, dtype),
      ...ggufVocabulary(source.tokenizer, model.config, source.template),
    ],
    ggufTensors(model, dtype),
  );
}
