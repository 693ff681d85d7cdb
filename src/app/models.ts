import { randomBytes } from 'node:crypto';
import { lstat, readdir, realpath, rename, rm } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { generateOnKernel, type GenerateResult } from '../architectures/generation.ts';
import { PromptTooLongError } from '../architectures/errors.ts';
import { parameterCount } from '../architectures/llama/config.ts';
import { LlamaDecoder } from '../architectures/llama/decoder.ts';
import { contextLengthOf, type LlamaModel } from '../architectures/llama/model.ts';
import { UsageError } from '../core/errors.ts';
import { makeDir } from '../core/make-dir.ts';
import type { FloatDtype } from '../formats/dtype.ts';
import type { TemplateMessage, TemplateTool } from '../hf/chat-template.ts';
import { loadModelDir, openModelDir, readHfCheckpoint } from '../hf/checkpoint.ts';
import type { LoadDtype } from '../hf/folder.ts';
import { ExportOverwritesInputError, HfFolderError } from '../hf/errors.ts';
import { exportGguf, exportHf } from '../hf/export.ts';
import { actionFormatOf } from '../policy/hf/hf-policy.ts';
import type { Checkpoint } from '../policy/tfjs/checkpoint.ts';

/**
 * A model named on the command line (`--model`): `hf:DIR`, a Hugging Face folder of the Llama
 * family, or `ckpt:DIR`, a checkpoint this project saved (the built-in GPT's). One handle for what
 * the `model` commands do with either: describe it, tokenize, render a conversation, generate, export.
 */
export interface ModelHandle {
  spec: string;
  info(): { [key: string]: unknown };
  tokenize(text: string): number[];
  /** The rendered prompt for a conversation (with the assistant's opening unless told not to). */
  render(messages: readonly TemplateMessage[], tools: readonly TemplateTool[], generationPrompt: boolean): string;
  /** Generates from prompt ids (greedy at temperature 0), stopping at the model's end-of-sequence ids. */
  generate(
    prompt: readonly number[],
    options: { maxNewTokens: number; temperature: number; seed: number },
  ): Promise<{
    ids: number[];
    logprobs: number[];
    text: string;
  }>;
  vocabSize: number;
  /** The most tokens a prompt and its generation span (a longer prompt is refused). */
  contextLength: number;
  /** The folders the model is read from (a LoRA checkpoint's and its base's): an export must not write there. */
  inputs: string[];
  /** Writes the export at `out` (a new path: exportModel picks it and puts it in place). */
  export(format: 'gguf' | 'hf', out: string, dtype?: FloatDtype): Promise<void>;
}

export async function openModel(spec: string, options: { dtype?: LoadDtype } = {}): Promise<ModelHandle> {
  if (spec.startsWith('hf:')) return hfHandle(spec, spec.slice('hf:'.length), options.dtype);
  if (spec.startsWith('ckpt:') && (await readHfCheckpoint(spec.slice('ckpt:'.length))))
    return hfHandle(spec, spec.slice('ckpt:'.length), options.dtype);
  if (spec.startsWith('ckpt:')) {
    const { loadCheckpoint } = await import('../policy/tfjs/checkpoint.ts');
    const { initBackend } = await import('../policy/tfjs/backend.ts');
    await initBackend();
    return gptHandle(spec, await loadCheckpoint(spec.slice('ckpt:'.length)));
  }
  throw new UsageError(`--model must be hf:DIR (a Hugging Face folder) or ckpt:DIR (a checkpoint), got "${spec}"`);
}

/**
 * Exports a model to `out` without ever touching what it reads: an `out` that is, holds or lies in
 * one of its folders (or a file they link to) is refused. The export is written aside, in a sibling,
 * and renamed into place only once complete, so `force` replaces an existing `out` only with a whole
 * new one, and a failed export leaves `out` as it was.
 */
export async function exportModel(
  handle: ModelHandle,
  format: 'gguf' | 'hf',
  out: string,
  options: { dtype?: FloatDtype; force?: boolean } = {},
): Promise<void> {
  const target = await realTarget(out);
  for (const input of await inputPaths(handle.inputs)) {
    const relation = within(target, input.path)
      ? target === input.path
        ? 'is'
        : 'is inside'
      : within(input.path, target)
        ? 'contains'
        : null;
    // Only a folder holds anything: a path "inside" a file does not exist.
    if (relation && (relation !== 'is inside' || input.folder))
      throw new ExportOverwritesInputError(out, input.path, relation);
  }
  const exists = (await lstat(out).catch(() => null)) !== null;
  if (exists && !options.force)
    throw new UsageError(`${out} exists; choose another --out, or pass --force to overwrite it`);
  const parent = dirname(resolve(out));
  makeDir(parent);
  const aside = (what: string) =>
    join(parent, `.${basename(out)}.${what}-${process.pid}-${randomBytes(4).toString('hex')}`);
  const fresh = aside('export');
  try {
    await handle.export(format, fresh, options.dtype);
  } catch (error) {
    await rm(fresh, { recursive: true, force: true });
    throw error;
  }
  if (!exists) {
    await rename(fresh, out);
    return;
  }
  // The old output goes aside before the new one takes its name, and comes back if that fails.
  const old = aside('replaced');
  await rename(out, old);
  try {
    await rename(fresh, out);
  } catch (error) {
    await rename(old, out);
    await rm(fresh, { recursive: true, force: true });
    throw error;
  }
  await rm(old, { recursive: true, force: true });
}

/** `path` with its symbolic links resolved, as far as it exists (the rest as given). */
async function realTarget(path: string): Promise<string> {
  const full = resolve(path);
  const real = await realpath(full).catch(() => null);
  if (real) return real;
  const parent = dirname(full);
  return parent === full ? full : join(await realTarget(parent), basename(full));
}

/** The folders a model is read from and what their entries resolve to (a Hugging Face cache's files link elsewhere). */
async function inputPaths(dirs: readonly string[]): Promise<{ path: string; folder: boolean }[]> {
  const paths: { path: string; folder: boolean }[] = [];
  for (const dir of dirs) {
    const real = await realTarget(dir);
    paths.push({ path: real, folder: true });
    for (const entry of await readdir(real).catch(() => [])) {
      const to = await realpath(join(real, entry)).catch(() => null);
      if (to && !within(to, real)) paths.push({ path: to, folder: (await lstat(to)).isDirectory() });
    }
  }
  return paths;
}

/** Whether `path` is `folder` or lies inside it (both absolute and resolved). */
function within(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

/** A Hugging Face folder or checkpoint (LoRA adapters merged into their base when the weights are needed). */
async function hfHandle(spec: string, dir: string, dtype?: LoadDtype): Promise<ModelHandle> {
  const { folder, checkpoint } = await openModelDir(dir);
  let loaded: LlamaModel | undefined;
  const model = async () => (loaded ??= (await loadModelDir(dir, { dtype })).model);
  const c = folder.config;
  const template = () => {
    if (!folder.template)
      throw new HfFolderError(
        folder.dir,
        null,
        'has no chat template (tokenizer_config.json chat_template or chat_template.jinja)',
      );
    return folder.template;
  };
  const eos = new Set(folder.eosTokenIds);
  // What loadModelDir's model computes over (LlamaModel's context).
  const context = contextLengthOf(c);
  return {
    spec,
    vocabSize: c.vocabSize,
    contextLength: context,
    inputs: [dir, ...(checkpoint?.base ? [checkpoint.base.dir] : [])],
    info: () => ({
      model: spec,
      architecture: c.architecture,
      parameters: parameterCount(c),
      dtype: folder.dtype,
      hiddenSize: c.hiddenSize,
      layers: c.numLayers,
      heads: c.numHeads,
      kvHeads: c.numKvHeads,
      headDim: c.headDim,
      intermediateSize: c.intermediateSize,
      vocabSize: c.vocabSize,
      tokenizerTokens: folder.tokenizer.vocabSize,
      contextLength: context,
      tiedEmbeddings: c.tieEmbeddings,
      ropeTheta: c.ropeTheta,
      ropeScaling: c.ropeScaling?.type ?? null,
      qkvBias: c.qkvBias,
      qkNorm: c.qkNorm,
      eosTokenIds: folder.eosTokenIds,
      template: folder.template ? folder.template.file : null,
      toolCalls: folder.template ? actionFormatOf(folder.template) : null,
      files: [...new Set([...folder.weights.values()].map((e) => e.file))].length,
      ...(checkpoint ? { version: checkpoint.hash } : {}),
      ...(checkpoint?.base ? { loraBase: checkpoint.base.dir } : {}),
    }),
    tokenize: (text) => folder.tokenizer.encode(text),
    render: (messages, tools, generationPrompt) =>
      template().render({ messages, tools, addGenerationPrompt: generationPrompt }),
    generate: async (prompt, o) => {
      // Past the context the engine generates nothing: said (before the weights load), not answered
      // with an empty result.
      if (prompt.length > context) throw new PromptTooLongError(prompt.length, context);
      const [res] = await generateOnKernel(
        LlamaDecoder.for(await model()),
        [{ tokens: prompt, seed: o.seed, maxTokens: o.maxNewTokens }],
        { sampling: { temperature: o.temperature }, eosTokens: eos },
      );
      return { ids: res!.tokens, logprobs: res!.logprobs, text: folder.tokenizer.decode(res!.tokens) };
    },
    export: async (format, out, dtype) => {
      const m = await model();
      // Merged adapters are float32 values whatever the base's dtype: exported as such unless told.
      const as = dtype ?? (checkpoint?.base ? 'F32' : folder.dtype);
      if (format === 'gguf') await exportGguf(folder, m, out, as);
      else await exportHf(folder, m, out, as);
    },
  };
}

async function gptHandle(spec: string, ckpt: Checkpoint): Promise<ModelHandle> {
  const { chatEncoding } = await import('../policy/tfjs/chat-template.ts');
  const { generate } = await import('../policy/tfjs/generate.ts');
  const tok = ckpt.tokenizer;
  const c = ckpt.model.config;
  const encoding = chatEncoding(tok);
  const specials = tok.toJSON().specials;
  return {
    spec,
    vocabSize: c.vocabSize,
    contextLength: c.contextLength,
    inputs: [spec.slice('ckpt:'.length)],
    info: () => ({
      model: spec,
      architecture: 'agent-r1-gpt',
      parameters: ckpt.model.parameterCount(),
      dtype: 'F32',
      hiddenSize: c.dModel,
      layers: c.nLayers,
      heads: c.nHeads,
      intermediateSize: c.dMlp,
      vocabSize: c.vocabSize,
      contextLength: c.contextLength,
      positions: c.positions,
      copyHead: c.copyHead,
      template: 'agent-r1 (control tokens)',
      toolCalls: 'tags',
      version: ckpt.hash,
    }),
    tokenize: (text) => tok.encode(text),
    // The template is ids with control tokens that no text encodes to: written here by their names.
    render: (messages, _tools, generationPrompt) => {
      const ids = encoding.prompt(messages.map((m) => ({ role: m.role as never, content: m.content ?? '' })));
      if (!generationPrompt) ids.pop();
      let text = '';
      let run: number[] = [];
      for (const id of [...ids, -1]) {
        if (id >= 0 && id >= specials.length) run.push(id);
        else {
          text += tok.decode(run);
          run = [];
          if (id >= 0) text += specials[id];
        }
      }
      return text;
    },
    generate: async (prompt, o) => {
      if (prompt.length > c.contextLength) throw new PromptTooLongError(prompt.length, c.contextLength);
      const [res] = (await generate(ckpt.model, [{ tokens: prompt, seed: o.seed, maxTokens: o.maxNewTokens }], {
        sampling: { temperature: o.temperature },
        eosTokens: new Set([tok.eos, tok.special('<|end|>')]),
        pad: tok.pad,
      })) as GenerateResult[];
      return { ids: res!.tokens, logprobs: res!.logprobs, text: tok.decode(res!.tokens) };
    },
    export: async () => {
      throw new UsageError(
        `${resolve(spec.slice('ckpt:'.length))} holds the built-in GPT, which no other engine runs (token shift, copy head): only Llama-family models export to GGUF or Hugging Face`,
      );
    },
  };
}
