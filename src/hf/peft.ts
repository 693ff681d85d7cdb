import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LLAMA_LORA_TARGETS, llamaWeights, type LlamaConfig } from '../architectures/llama/config.ts';
import { ModelConfigError } from '../architectures/errors.ts';
import { checkLoraConfig, isLoraTarget, type LoraAdapters, type LoraPair } from '../architectures/lora.ts';
import { isFloatDtype } from '../formats/dtype.ts';
import { readSafetensorsHeader, readTensor, writeSafetensors } from '../formats/safetensors.ts';
import { HfFolderError } from './errors.ts';
import { readJsonFile } from './read-json.ts';

/**
 * LoRA adapters as PEFT saves them, so that PEFT (`PeftModel.from_pretrained`), vLLM
 * (`--lora-modules`) and llama.cpp's convert_lora_to_gguf.py read them: adapter_config.json and
 * adapter_model.safetensors, each weight's pair under `base_model.model.<module>.lora_A.weight`
 * [rank, in] and `….lora_B.weight` [out, rank]. Only what this project trains is read back: plain
 * LoRA (no DoRA, rsLoRA, per-module ranks, biases or extra saved modules).
 */
export const PEFT_CONFIG_FILE = 'adapter_config.json';
export const PEFT_WEIGHTS_FILE = 'adapter_model.safetensors';

const MAX_ADAPTER_CONFIG_BYTES = 1 << 20;
const key = (name: string, half: 'A' | 'B') => `base_model.model.${name.replace(/\.weight$/, '')}.lora_${half}.weight`;

/** The weights of a model the adapters' targets name, with their shapes. */
export function loraWeights(config: LlamaConfig, targets: readonly string[]) {
  return llamaWeights(config).filter((w) => isLoraTarget(w.name, targets));
}

/** Writes adapter_config.json and adapter_model.safetensors (float32) into `dir`. */
export async function writePeftAdapter(dir: string, adapters: LoraAdapters, baseModel: string): Promise<void> {
  const { config, pairs } = adapters;
  const tensors = [...pairs].flatMap(([name, pair]) => {
    const out = pair.B.length / config.rank;
    const inDim = pair.A.length / config.rank;
    return [
      { name: key(name, 'A'), dtype: 'F32' as const, shape: [config.rank, inDim], values: () => pair.A },
      { name: key(name, 'B'), dtype: 'F32' as const, shape: [out, config.rank], values: () => pair.B },
    ];
  });
  await writeSafetensors(join(dir, PEFT_WEIGHTS_FILE), tensors);
  const json = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: config.rank,
    lora_alpha: config.alpha,
    target_modules: [...config.targets],
    lora_dropout: 0,
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    use_dora: false,
    init_lora_weights: true,
    inference_mode: true,
    modules_to_save: null,
    rank_pattern: {},
    alpha_pattern: {},
  };
  await writeFile(join(dir, PEFT_CONFIG_FILE), `${JSON.stringify(json, null, 2)}\n`);
}

/** Reads a PEFT LoRA adapter for a model of `config`, every tensor checked against the weight it adapts. */
export async function readPeftAdapter(dir: string, config: LlamaConfig): Promise<LoraAdapters> {
  const file = join(dir, PEFT_CONFIG_FILE);
  const json = (await readJsonFile(file, MAX_ADAPTER_CONFIG_BYTES))!;
  const fail = (field: string, problem: string): never => {
    throw new HfFolderError(file, field, problem);
  };
  if (json.peft_type !== 'LORA') fail('peft_type', `is ${JSON.stringify(json.peft_type)}; only LORA adapters are read`);
  for (const [field, plain] of [
    ['use_dora', false],
    ['use_rslora', false],
    ['fan_in_fan_out', false],
    ['bias', 'none'],
  ] as const)
    if (json[field] !== undefined && json[field] !== plain)
      fail(field, `is ${JSON.stringify(json[field])}; only plain LoRA (${field} ${JSON.stringify(plain)}) is read`);
  for (const field of ['rank_pattern', 'alpha_pattern'])
    if (json[field] && Object.keys(json[field] as object).length > 0) fail(field, 'per-module ranks are not read');
  if (json.modules_to_save) fail('modules_to_save', 'fully trained extra modules are not read');
  const targets = json.target_modules;
  if (!Array.isArray(targets) || targets.length === 0 || !targets.every((t) => typeof t === 'string'))
    fail('target_modules', 'must be a non-empty list of module names');
  const unknown = (targets as string[]).find((t) => !(LLAMA_LORA_TARGETS as readonly string[]).includes(t));
  if (unknown !== undefined)
    fail(
      'target_modules',
      `${JSON.stringify(unknown)} is not a projection this build adapts (${LLAMA_LORA_TARGETS.join(', ')})`,
    );
  const lora = { rank: json.r as number, alpha: json.lora_alpha as number, targets: targets as string[] };
  const weights = loraWeights(config, lora.targets);
  try {
    checkLoraConfig(
      lora,
      weights.map((w) => w.shape),
      file,
    );
  } catch (error) {
    if (error instanceof ModelConfigError) fail(error.field === 'rank' ? 'r' : 'lora_alpha', error.problem);
    throw error;
  }
  const weightsFile = join(dir, PEFT_WEIGHTS_FILE);
  const entries = new Map((await readSafetensorsHeader(weightsFile)).tensors.map((t) => [t.name, t]));
  const pairs = new Map<string, LoraPair>();
  for (const { name, shape } of weights) {
    const [out, inDim] = shape as [number, number];
    const read = async (half: 'A' | 'B', want: number[]) => {
      const e = entries.get(key(name, half));
      if (!e) return fail(key(name, half), `is not in ${PEFT_WEIGHTS_FILE}, though target_modules adapts ${name}`);
      if (e.shape.join(',') !== want.join(','))
        throw new HfFolderError(weightsFile, e.name, `has shape [${e.shape}]; rank ${lora.rank} needs [${want}]`);
      if (!isFloatDtype(e.dtype)) throw new HfFolderError(weightsFile, e.name, `is ${e.dtype}, not a float`);
      entries.delete(e.name);
      return readTensor(e);
    };
    pairs.set(name, { A: await read('A', [lora.rank, inDim]), B: await read('B', [out, lora.rank]) });
  }
  const extra = [...entries.keys()][0];
  if (extra !== undefined)
    throw new HfFolderError(weightsFile, extra, `adapts nothing of ${config.architecture} with ${PEFT_CONFIG_FILE}`);
  return { config: lora, pairs };
}
