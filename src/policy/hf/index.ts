/**
 * Hugging Face checkpoints (`agent-r1-ts/models`): a folder of the Llama family (Llama 3.x, SmolLM2,
 * Qwen2, Qwen3) opened, loaded and played as a policy with its own tokenizer, chat template and
 * tool-call syntax; exported as GGUF (llama.cpp, Ollama) or a Hugging Face folder.
 *
 *   const policy = await loadHfPolicy('./Qwen3-0.6B');            // a BatchPolicy: rollout({ policy, … })
 *   const folder = await openHfFolder('./Qwen3-0.6B');            // config, tokenizer, template, weight index
 *   const { model } = await loadHfModel(folder);                  // float32 weights (BF16 matrices kept 16-bit)
 *   await exportGguf(folder, model, 'qwen3.gguf', 'F32');
 *   const { model: tuned } = await loadModelDir('./runs/grpo/final');  // a checkpoint: LoRA adapters merged
 */
export { HfPolicy, loadHfPolicy, actionFormatOf, type HfPolicyOptions } from './hf-policy.ts';
export { HfChatEncoding } from './chat-encoding.ts';
export { openHfFolder, openHfChat, loadHfModel, type HfFolder, type HfChat } from '../../hf/folder.ts';
export { HfTokenizer, type AddedToken } from '../../hf/tokenizer.ts';
export {
  ChatTemplate,
  TEMPLATE_DATE,
  type RenderInput,
  type TemplateMessage,
  type TemplateTool,
} from '../../hf/chat-template.ts';
export { exportGguf, exportHf } from '../../hf/export.ts';
export {
  loadModelDir,
  openModelDir,
  readHfCheckpoint,
  type HfCheckpointJson,
  type LoadedModelDir,
} from '../../hf/checkpoint.ts';
export { readPeftAdapter, writePeftAdapter, loraWeights } from '../../hf/peft.ts';
export {
  initLora,
  mergeLora,
  loraScale,
  type LoraAdapters,
  type LoraConfig,
  type LoraPair,
} from '../../architectures/lora.ts';
export { HfFolderError, ChatTemplateError } from '../../hf/errors.ts';
export {
  LLAMA_ARCHITECTURES,
  LLAMA_LORA_TARGETS,
  maxWeightBytes,
  kernelWeightBytes,
  llamaConfigFromHf,
  llamaWeights,
  parameterCount,
  type LlamaArchitecture,
  type LlamaConfig,
} from '../../architectures/llama/config.ts';
export { Bfloat16Weight, LlamaModel, type StoredWeight } from '../../architectures/llama/model.ts';
export { LlamaDecoder } from '../../architectures/llama/decoder.ts';
export { ModelConfigError } from '../../architectures/errors.ts';
export { generateOnKernel, type GenerateRequest, type GenerateResult } from '../../architectures/generation.ts';
export { readSafetensorsHeader, readTensor, writeSafetensors, type TensorEntry } from '../../formats/safetensors.ts';
export { writeGguf, type GgufTensor, type GgufValue } from '../../formats/gguf.ts';
export { ModelFileError } from '../../formats/errors.ts';
export type { FloatDtype } from '../../formats/dtype.ts';
