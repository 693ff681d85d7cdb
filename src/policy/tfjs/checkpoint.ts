import * as tf from '@tensorflow/tfjs';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { AgentR1Error } from '../../core/errors.ts';
import { makeDir } from '../../core/make-dir.ts';
import { canonicalJson } from '../../core/canonical-json.ts';
import type { Json } from '../../core/types.ts';
import {
  parameterCount,
  parameterShapes,
  parseModelConfig,
  type ModelConfig,
} from '../../architectures/gpt/model-config.ts';
import { GPTModel } from '../../architectures/gpt/model.ts';
import { Tokenizer, type TokenizerJSON } from './tokenizer.ts';

/**
 * Checkpoints: a directory with `model.json` (format, model config, tokenizer, weight specs, the
 * content hash, free-form metadata) and `weights.bin` (the weights, float32, in the model's fixed
 * order). Written through a tfjs IOHandler of our own (no tfjs-node needed), into a temporary
 * sibling directory that is then renamed into place, so a reader never sees half a checkpoint.
 */
const CHECKPOINT_FORMAT = 'agent-r1-gpt';
const CHECKPOINT_VERSION = 1;

/** model.json holds the config, the tokenizer (merges) and the weight specs: far below this. */
const MAX_MODEL_JSON_BYTES = 64 * 1024 * 1024;

export class CheckpointError extends AgentR1Error {}

/** The weight specs must be exactly the config's weights, in order, as plain float32. */
function checkWeightSpecs(
  specs: readonly unknown[],
  config: ModelConfig,
  fail: (why: string) => CheckpointError,
): void {
  const wanted = parameterShapes(config);
  if (specs.length !== wanted.length) {
    throw fail(`${specs.length} weight specs; the config has ${wanted.length} weights`);
  }
  wanted.forEach(([name, shape], i) => {
    const spec = specs[i] as Partial<tf.io.WeightsManifestEntry> | null;
    const ok =
      spec?.name === name &&
      spec.dtype === 'float32' &&
      spec.quantization === undefined &&
      Array.isArray(spec.shape) &&
      spec.shape.join(',') === shape.join(',');
    if (!ok)
      throw fail(
        `weight spec ${i} is ${JSON.stringify(spec)?.slice(0, 200)}; the config needs ${name} float32 [${shape}]`,
      );
  });
}

export interface Checkpoint {
  model: GPTModel;
  tokenizer: Tokenizer;
  /** sha256 over the config, tokenizer and weights: the policy version in records. */
  hash: string;
  meta: { [key: string]: Json };
}

interface ModelJson {
  format: string;
  version: number;
  hash: string;
  modelConfig: ModelConfig;
  tokenizer: TokenizerJSON;
  weightSpecs: tf.io.WeightsManifestEntry[];
  weightsFile: string;
  meta: { [key: string]: Json };
}

/** sha256 of the config, tokenizer and weight bytes (the order of namedWeights). */
export function contentHash(config: ModelConfig, tokenizer: TokenizerJSON, weights: ArrayBuffer | Uint8Array): string {
  const h = createHash('sha256');
  h.update(canonicalJson({ config, tokenizer }));
  h.update(weights instanceof Uint8Array ? weights : new Uint8Array(weights));
  return h.digest('hex');
}

/** The model's content hash without writing it anywhere. */
export async function modelHash(model: GPTModel, tokenizer: Tokenizer): Promise<string> {
  const { data } = await tf.io.encodeWeights(model.namedWeights().map(([name, tensor]) => ({ name, tensor })));
  return contentHash(model.config, tokenizer.toJSON(), concat(data));
}

function concat(data: ArrayBuffer | ArrayBuffer[]): Uint8Array {
  if (!Array.isArray(data)) return new Uint8Array(data);
  const total = data.reduce((n, b) => n + b.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const b of data) {
    out.set(new Uint8Array(b), at);
    at += b.byteLength;
  }
  return out;
}

/**
 * A tfjs IOHandler for a checkpoint directory: `save` writes model.json + weights.bin atomically,
 * `load` reads them back. The model topology slot carries our own config and tokenizer.
 */
export function checkpointIO(dir: string): tf.io.IOHandler {
  const target = resolve(dir);
  return {
    async save(artifacts: tf.io.ModelArtifacts): Promise<tf.io.SaveResult> {
      const extra = artifacts.modelTopology as unknown as {
        modelConfig: ModelConfig;
        tokenizer: TokenizerJSON;
        meta?: { [key: string]: Json };
      };
      const weights = concat(artifacts.weightData as ArrayBuffer | ArrayBuffer[]);
      const json: ModelJson = {
        format: CHECKPOINT_FORMAT,
        version: CHECKPOINT_VERSION,
        hash: contentHash(extra.modelConfig, extra.tokenizer, weights),
        modelConfig: extra.modelConfig,
        tokenizer: extra.tokenizer,
        weightSpecs: artifacts.weightSpecs ?? [],
        weightsFile: 'weights.bin',
        meta: extra.meta ?? {},
      };
      makeDir(dirname(target));
      const tmp = join(dirname(target), `.${basename(target)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
      await mkdir(tmp);
      try {
        await writeFile(join(tmp, 'weights.bin'), weights);
        await writeFile(join(tmp, 'model.json'), JSON.stringify(json, null, 1) + '\n');
        // rename() cannot replace a non-empty directory: move the old one aside first.
        const exists = await stat(target).then(
          () => true,
          () => false,
        );
        const old = `${tmp}.old`;
        if (exists) await rename(target, old);
        await rename(tmp, target);
        if (exists) await rm(old, { recursive: true, force: true });
      } catch (error) {
        await rm(tmp, { recursive: true, force: true });
        throw error;
      }
      return {
        modelArtifactsInfo: {
          dateSaved: new Date(0),
          modelTopologyType: 'JSON',
          weightDataBytes: weights.byteLength,
        },
      };
    },
    async load(): Promise<tf.io.ModelArtifacts> {
      const file = join(target, 'model.json');
      const fail = (why: string) => new CheckpointError(`checkpoint ${dir}: ${why}`);
      const size = await stat(file).then(
        (st) => (st.isFile() ? st.size : -1),
        (error: NodeJS.ErrnoException) => {
          throw new CheckpointError(`cannot read checkpoint ${file}: ${error.code ?? error.message}`);
        },
      );
      if (size < 0) throw fail('model.json is not a file');
      if (size > MAX_MODEL_JSON_BYTES) throw fail(`model.json is ${size} bytes; the most is ${MAX_MODEL_JSON_BYTES}`);
      const text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
        throw new CheckpointError(`cannot read checkpoint ${file}: ${error.code ?? error.message}`);
      });
      let json: ModelJson;
      try {
        json = JSON.parse(text) as ModelJson;
      } catch (error) {
        throw new CheckpointError(`${file} is not JSON: ${(error as Error).message}`);
      }
      if (json?.format !== CHECKPOINT_FORMAT || json.version !== CHECKPOINT_VERSION) {
        const found = json?.format === CHECKPOINT_FORMAT ? ` (found version ${JSON.stringify(json.version)})` : '';
        throw new CheckpointError(`${file} is not an ${CHECKPOINT_FORMAT} v${CHECKPOINT_VERSION} checkpoint${found}`);
      }
      if (!Array.isArray(json.weightSpecs) || typeof json.weightsFile !== 'string' || json.weightsFile.includes('/')) {
        throw new CheckpointError(`${file} has no valid weight specs / weights file`);
      }
      // Untrusted until here: the config is bounded, then held against the weight specs, the tokenizer
      // and the weights file's size, all before a byte of weights is read or a tensor allocated.
      let config: ModelConfig;
      try {
        config = parseModelConfig(json.modelConfig);
      } catch (error) {
        throw fail((error as Error).message);
      }
      checkWeightSpecs(json.weightSpecs, config, fail);
      const tok = json.tokenizer as Partial<TokenizerJSON> | undefined;
      const tokenizerSize =
        Array.isArray(tok?.specials) && Array.isArray(tok.merges) ? tok.specials.length + 256 + tok.merges.length : -1;
      if (tokenizerSize !== config.vocabSize) {
        throw fail(`model vocabulary (${config.vocabSize}) and tokenizer (${tokenizerSize}) differ`);
      }
      const weightsPath = join(target, json.weightsFile);
      const expected = 4 * parameterCount(config);
      const actual = await stat(weightsPath).then(
        (st) => (st.isFile() ? st.size : -1),
        (error: NodeJS.ErrnoException) => {
          throw new CheckpointError(`cannot read ${json.weightsFile} of ${target}: ${error.code ?? error.message}`);
        },
      );
      if (actual !== expected) {
        throw fail(`${json.weightsFile} is ${actual} bytes; the config's weights take ${expected}`);
      }
      const data = await readFile(weightsPath).catch((error: NodeJS.ErrnoException) => {
        throw new CheckpointError(`cannot read ${json.weightsFile} of ${target}: ${error.code ?? error.message}`);
      });
      const weightData = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
      return {
        modelTopology: {
          modelConfig: json.modelConfig,
          tokenizer: json.tokenizer,
          meta: json.meta,
          hash: json.hash,
        } as unknown as object,
        weightSpecs: json.weightSpecs,
        weightData,
        format: CHECKPOINT_FORMAT,
      };
    },
  };
}

/** Saves model + tokenizer (+ metadata such as the SFT run's settings) to `dir`, atomically. Returns the content hash. */
export async function saveCheckpoint(
  dir: string,
  model: GPTModel,
  tokenizer: Tokenizer,
  meta: { [key: string]: Json } = {},
): Promise<string> {
  if (model.config.vocabSize !== tokenizer.vocabSize) {
    throw new CheckpointError(
      `model vocabulary (${model.config.vocabSize}) and tokenizer (${tokenizer.vocabSize}) differ`,
    );
  }
  const { data, specs } = await tf.io.encodeWeights(model.namedWeights().map(([name, tensor]) => ({ name, tensor })));
  await checkpointIO(dir).save!({
    modelTopology: { modelConfig: model.config, tokenizer: tokenizer.toJSON(), meta } as unknown as object,
    weightSpecs: specs,
    weightData: data,
  });
  return contentHash(model.config, tokenizer.toJSON(), concat(data));
}

/** Loads a checkpoint and verifies its content hash (a corrupted weights file is an error). */
export async function loadCheckpoint(dir: string): Promise<Checkpoint> {
  const artifacts = await checkpointIO(dir).load!();
  const top = artifacts.modelTopology as unknown as {
    modelConfig: unknown;
    tokenizer: TokenizerJSON;
    meta: { [key: string]: Json };
    hash: string;
  };
  const config = (() => {
    try {
      return parseModelConfig(top.modelConfig);
    } catch (error) {
      throw new CheckpointError(`checkpoint ${dir}: ${(error as Error).message}`);
    }
  })();
  const tokenizer = new Tokenizer(top.tokenizer);
  const bytes = new Uint8Array(artifacts.weightData as ArrayBuffer);
  const hash = contentHash(config, tokenizer.toJSON(), bytes);
  if (hash !== top.hash)
    throw new CheckpointError(
      `checkpoint ${dir}: content hash mismatch (stored ${top.hash.slice(0, 12)}, computed ${hash.slice(0, 12)})`,
    );
  if (config.vocabSize !== tokenizer.vocabSize) {
    throw new CheckpointError(
      `checkpoint ${dir}: model vocabulary (${config.vocabSize}) and tokenizer (${tokenizer.vocabSize}) differ`,
    );
  }
  let named: tf.NamedTensorMap;
  try {
    named = tf.io.decodeWeights(artifacts.weightData as ArrayBuffer, artifacts.weightSpecs ?? []);
  } catch (error) {
    throw new CheckpointError(`checkpoint ${dir}: cannot decode weights: ${(error as Error).message}`);
  }
  const weights = new Map(Object.entries(named));
  try {
    const model = new GPTModel(config, 0, weights);
    return { model, tokenizer, hash, meta: top.meta ?? {} };
  } finally {
    for (const t of weights.values()) t.dispose();
  }
}
