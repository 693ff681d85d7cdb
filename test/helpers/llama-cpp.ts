import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { repoRoot } from './cli.ts';

// llama.cpp as an oracle (test/oracles/llama-cpp.mjs: node-llama-cpp 3.21.1's CPU build, installed
// on first use), run in a child process per request.

export interface LlamaCppResult {
  tokens?: number[][];
  generated?: { ids: number[]; logprobs: number[] };
}

/** Installs the oracle when missing (slow the first time). */
export function installLlamaCpp(): void {
  execFileSync(process.execPath, [join(repoRoot, 'test/oracles/llama-cpp.mjs'), '--install'], { stdio: 'ignore' });
}

/** Runs one request (see test/oracles/llama-cpp.mjs), its file written into `scratch`. */
export async function llamaCpp(scratch: string, request: object): Promise<LlamaCppResult> {
  const file = join(scratch, `request-${Math.random()}.json`);
  await writeFile(file, JSON.stringify(request));
  const out = execFileSync(process.execPath, [join(repoRoot, 'test/oracles/llama-cpp.mjs'), file], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}
