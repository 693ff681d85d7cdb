import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculator } from '../../scenarios/calculator/index.ts';
import { initBackend, saveCheckpoint } from '../../src/policy/tfjs/index.ts';
import { trainSft } from '../../src/policy/tfjs/sft.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';

export const calc = calculator as Exclude<typeof calculator, (...args: never[]) => unknown> as Scenario;

let built: Promise<{ dir: string; seconds: number; finalLoss: number }> | undefined;

/**
 * A small checkpoint that has learnt the calculator's action format by behaviour cloning a few
 * expert episodes (a few seconds on CPU): greedy decoding makes real tool calls and answers, so the
 * server's tool_calls, the multi-turn bridge and the external policy are exercised on real output.
 * Saved with greedy sampling (temperature 0). Built once per test process.
 */
export function calculatorCheckpoint(): Promise<{ dir: string; seconds: number; finalLoss: number }> {
  built ??= (async () => {
    await initBackend();
    const { records } = await rollout({
      scenario: calc,
      policy: calc.policies.expert!({ scenario: calc, seed: 0 }) as never,
      split: 'train',
      episodes: 2,
      seed: 0,
    });
    const trained = await trainSft({
      records,
      vocabSize: 400,
      model: { dModel: 32, nLayers: 1, nHeads: 2, contextLength: 1024 },
      steps: 50,
      batchSize: 2,
      lr: 2e-2,
      seed: 1,
    });
    const dir = join(mkdtempSync(join(tmpdir(), 'agent-r1-openai-')), 'ckpt');
    await saveCheckpoint(dir, trained.model, trained.tokenizer, { sampling: { temperature: 0 } });
    return { dir, seconds: trained.seconds, finalLoss: trained.finalLoss };
  })();
  return built;
}
