/**
 * The tfjs policy: the API the trainers (SFT, RL) use. Stable: add, do not change.
 *
 *   await initBackend();                              // once: tfjs-node-gpu → tfjs-node → webgpu → wasm → cpu
 *   const model = new GPTModel({vocabSize, ...DEFAULT_MODEL_CONFIG}, seed);
 *   const opt = new AdamW(model.trainableVariables, {lr: 1e-3, schedule: {warmupSteps: 20, totalSteps: 500}, clipNorm: 1});
 *   const {tokens, mask} = padBatch(seqs, tokenizer.pad, masks);          // [B, T] int32, [B, T] float
 *   const stats = await opt.minimize(() => {
 *     const s = scoreSequences(model, {tokens});     // logprobs / values / entropy, all [B, T]
 *     return maskedNll(s.logprobs, mask);            // or a PPO/GRPO loss built from s
 *   });                                              // → {loss, gradNorm, lr, step}
 *   const hash = await saveCheckpoint(dir, model, tokenizer, meta);       // atomic; hash = policy version
 *   const {model, tokenizer, hash} = await loadCheckpoint(dir);
 *   const policy = new TfjsPolicy({id, version: hash, model, tokenizer}); // a BatchPolicy for rollouts
 *
 * Alignment of scoreSequences: index t is about token t (log π(token t | tokens < t), the value of
 * the state before it, the entropy of its distribution); index 0 is 0. `model.forward(tokens)` gives
 * the raw logits [B, T, V] and values [B, T] for anything else. Both work inside tf.variableGrads.
 * `scoreTokens(model, tokens, select)` scores only chosen positions (flat b·T + t, e.g. from
 * maskedIndices(actionMasks, T)) and skips the output head elsewhere: use it when the agent's
 * tokens are a small part of the sequence.
 * After a weight update, call `policy.clearCache()` (cached keys/values belong to the old weights);
 * the decode kernel (wasm, cpu) notices the new weights itself and copies them in at its next call.
 * Everything that reads numbers back from the backend is async (minimize, applyGradients,
 * clipByGlobalNorm, generate, forwardRows): a GPU backend (webgpu) has no synchronous read in Node.
 */
export { initBackend, backendInfo, BACKEND_NAMES, BackendUnavailableError, type BackendInfo } from './backend.ts';
export { classifyAdapter, WebgpuDeviceError, type AdapterFacts } from './webgpu.ts';
export {
  DEFAULT_MODEL_CONFIG,
  parseModelConfig,
  modelConfigSchema,
  ModelError,
  type ModelConfig,
} from '../../architectures/gpt/model-config.ts';
export { GPTModel, type ForwardResult } from '../../architectures/gpt/model.ts';
export { forwardRows, newCache, type RowStep } from '../../architectures/gpt/decode.ts';
export {
  scoreSequences,
  scoreTokens,
  maskedIndices,
  maskedNll,
  padBatch,
  type ScoreBatch,
  type ScoreResult,
} from './score.ts';
export {
  AdamW,
  scheduleLr,
  clipByGlobalNorm,
  globalNorm,
  OptimizerError,
  type AdamWOptions,
  type DecayForm,
  type LrSchedule,
  type StepStats,
} from './adamw.ts';
export {
  saveCheckpoint,
  loadCheckpoint,
  checkpointIO,
  contentHash,
  modelHash,
  CheckpointError,
  type Checkpoint,
} from './checkpoint.ts';
export { Tokenizer, trainTokenizer, SPECIAL_TOKENS, TokenizerError, type TokenizerJSON } from './tokenizer.ts';
export { chatEncoding } from './chat-template.ts';
export { generate, defaultDecoder, type Decoder, type GenerateOptions } from './generate.ts';
export {
  sampleToken,
  GenerateError,
  type GenerateRequest,
  type GenerateResult,
  type SamplingOptions,
  type RowCache,
} from '../../architectures/generation.ts';
export { TfjsPolicy, loadCheckpointPolicy, type TfjsPolicyOptions } from './tfjs-policy.ts';
export { KVCache } from '../../architectures/kv-cache.ts';
export { KernelDecoder } from '../../architectures/gpt/kernel/kernel-decoder.ts';
export {
  KernelSession,
  KernelError,
  MAX_STEP_TOKENS,
  type KernelRowStep,
} from '../../architectures/kernel/kernel-host.ts';
export {
  trainSft,
  sequencesFromRecords,
  recordTexts,
  SftError,
  type SftOptions,
} from './sft.ts';
export { trainThreadsFor, GradientError, type GradientExecutor, type MicroGradient } from './data-parallel.ts';
