#!/usr/bin/env node
// llama.cpp as a test oracle and a benchmark baseline, through node-llama-cpp 3.21.1 (its prebuilt
// CPU binary). The package is not a dependency of this project: its optional CUDA and Vulkan
// binaries are ~600 MB, which every `npm ci` would pay for. It is installed on first use into a
// folder of its own, outside the checkout and kept between runs:
//   $AGENT_R1_LLAMA_CPP_DIR, default ~/.cache/agent-r1/node-llama-cpp-3.21.1
// with only this platform's CPU binary (npm --omit=optional, then that one package by name).
//
//   node test/oracles/llama-cpp.mjs --install             install if missing; print the folder
//   node test/oracles/llama-cpp.mjs REQUEST.json          run a request; print one JSON line
//
// A request: {"model": "F.gguf", "threads": 2,
//   "tokenize": ["text", …]                   → "tokens": [[ids], …] (special tokens parsed, no BOS added)
//   "generate": {"prompt": [ids], "maxTokens": N, "eos": [ids]}
//                                            → "generated": {"ids": […], "logprobs": […]}: greedy, each
//                                              logprob the log-softmax of the chosen id (F32 KV cache)
// }
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const LLAMA_CPP_VERSION = '3.21.1';

export function oracleDir() {
  return (
    process.env.AGENT_R1_LLAMA_CPP_DIR ?? join(homedir(), '.cache', 'agent-r1', `node-llama-cpp-${LLAMA_CPP_VERSION}`)
  );
}

/** The prebuilt binary package of this platform. */
function binaryPackage() {
  const { platform, arch } = process;
  if (platform === 'linux' && (arch === 'x64' || arch === 'arm64')) return `@node-llama-cpp/linux-${arch}`;
  if (platform === 'darwin') return `@node-llama-cpp/mac-${arch === 'arm64' ? 'arm64-metal' : 'x64'}`;
  if (platform === 'win32' && arch === 'x64') return '@node-llama-cpp/win-x64';
  throw new Error(`node-llama-cpp has no prebuilt CPU binary for ${platform}-${arch}`);
}

/** Installs node-llama-cpp into oracleDir() unless it is there; returns the folder. */
export function ensureInstalled() {
  const dir = oracleDir();
  if (existsSync(join(dir, 'node_modules', 'node-llama-cpp', 'package.json'))) return dir;
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  execFileSync(
    'npm',
    [
      'install',
      '--prefix',
      tmp,
      '--no-save',
      '--save-exact',
      '--omit=optional',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      `node-llama-cpp@${LLAMA_CPP_VERSION}`,
      `${binaryPackage()}@${LLAMA_CPP_VERSION}`,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  try {
    renameSync(tmp, dir);
  } catch (error) {
    // Another process installed it first: use theirs.
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, 'node_modules', 'node-llama-cpp', 'package.json'))) throw error;
  }
  return dir;
}

/** llama.cpp's CPU build, installed on first use: node-llama-cpp's `Llama`, errors logged only. */
export async function openLlama() {
  const dir = ensureInstalled();
  const { getLlama, LlamaLogLevel } = await import(
    pathToFileURL(join(dir, 'node_modules', 'node-llama-cpp', 'dist', 'index.js')).href
  );
  return getLlama({
    gpu: false,
    build: 'never',
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
  });
}

async function run(request) {
  const llama = await openLlama();
  const model = await llama.loadModel({ modelPath: request.model });
  const out = {};
  if (request.tokenize) out.tokens = request.tokenize.map((text) => Array.from(model.tokenize(text, true)));
  if (request.generate) {
    const { prompt, maxTokens, eos = [] } = request.generate;
    const context = await model.createContext({
      contextSize: Math.max(256, prompt.length + maxTokens + 8),
      threads: request.threads ?? 2,
      // F32 keys and values (llama.cpp's default is F16): the logits are then those of the weights.
      experimentalKvCacheKeyType: 'F32',
      experimentalKvCacheValueType: 'F32',
      flashAttention: false,
    });
    const sequence = context.getSequence();
    const ids = [];
    const logprobs = [];
    let input = prompt.slice();
    for (let i = 0; i < maxTokens; i++) {
      const items = [...input.slice(0, -1), [input.at(-1), { generateNext: { probabilities: true } }]];
      const probabilities = (await sequence.controlledEvaluate(items)).at(-1).next.probabilities;
      let best = -1;
      let p = -1;
      for (const [token, q] of probabilities) if (q > p || (q === p && token < best)) [best, p] = [token, q];
      ids.push(best);
      logprobs.push(Math.log(p));
      if (eos.includes(best)) break;
      input = [best];
    }
    out.generated = { ids, logprobs };
    await context.dispose();
  }
  await model.dispose();
  await llama.dispose();
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = process.argv[2];
  if (arg === '--install') process.stdout.write(`${ensureInstalled()}\n`);
  else if (arg) process.stdout.write(`${JSON.stringify(await run(JSON.parse(readFileSync(arg, 'utf8'))))}\n`);
  else {
    process.stderr.write('usage: llama-cpp.mjs --install | REQUEST.json\n');
    process.exit(2);
  }
}
