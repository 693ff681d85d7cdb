/**
 * A real, tiny tfjs policy and a two-turn toy scenario for the trainer's tests (no mocks):
 * the agent must call `peek` to learn a secret digit (0–3), then answer it. The model is a bigram
 * table — logits(next | previous token) — with a value per previous token; one token per action.
 * The best policy: after the prompt token, PEEK; after OBS_k, ANS_k. A uniform start succeeds
 * about 1 time in 48, so learning shows plainly within a few GRPO steps.
 */
import * as tf from '@tensorflow/tfjs';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { createRng } from '../../src/core/rng.ts';
import { resolveConfig, type TrainConfig } from '../../src/rl/config.ts';
import type { Task } from '../../src/core/types.ts';
import type { ToolEnv } from '../../src/env/tool-env.ts';
import type { Policy } from '../../src/policy/policy.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { tool } from '../../src/tools/tool.ts';
import type { RolloutSampling, ScoreOutput, ScoreRequest, TrainablePolicy } from '../../src/rl/trainable.ts';

export const PAD = 0;
export const BOS = 1;
export const PEEK = 2;
export const ANS = [3, 4, 5, 6];
export const OBS = [7, 8, 9, 10];
export const ERR = 11;
export const VOCAB = 12;

/** What each token means when the policy emits it. */
export function tokenText(tok: number): string {
  if (tok === PEEK) return '<tool_call>{"name": "peek", "arguments": {}}</tool_call>';
  const k = ANS.indexOf(tok);
  if (k >= 0) return `<answer>${k}</answer>`;
  return `junk${tok}`;
}

let instances = 0;

export class BigramPolicy implements TrainablePolicy {
  readonly maxLength = 32;
  readonly hasValueHead = true;
  readonly variables: tf.Variable[];
  private hash = '';

  constructor(
    readonly logits = tf.variable(tf.zeros([VOCAB, VOCAB]), true, `toy/logits-${instances++}`),
    readonly value = tf.variable(tf.zeros([VOCAB, 1]), true, `toy/value-${instances++}`),
  ) {
    this.variables = [this.logits, this.value];
    this.hash = this.hashWeights();
  }

  score(req: ScoreRequest): ScoreOutput {
    return <ScoreOutput>tf.tidy((): any => {
      const B = req.tokens.length;
      const T = req.length;
      const rows = req.tokens.map((r) => {
        const out = r.slice(0, T);
        while (out.length < T) out.push(PAD);
        return out;
      });
      const prev = tf.tensor2d(
        rows.map((r) => r.slice(0, T - 1)),
        [B, T - 1],
        'int32',
      );
      const next = tf.tensor2d(
        rows.map((r) => r.slice(1)),
        [B, T - 1],
        'int32',
      );
      const t = req.temperature && req.temperature !== 1 ? req.temperature : 1;
      const logp = tf.logSoftmax(tf.div(tf.gather(this.logits, prev), t)); // [B, T-1, V]
      const lp = tf.sum(tf.mul(logp, tf.oneHot(next, VOCAB)), -1);
      const pad = tf.zeros([B, 1]);
      const out: ScoreOutput = { logprobs: tf.concat([pad, lp], 1) as tf.Tensor2D };
      if (req.values)
        out.values = tf.concat([pad, tf.reshape(tf.gather(this.value, prev), [B, T - 1])], 1) as tf.Tensor2D;
      if (req.entropy) out.entropy = tf.concat([pad, tf.neg(tf.sum(tf.mul(tf.exp(logp), logp), -1))], 1) as tf.Tensor2D;
      return out;
    });
  }

  policy(sampling: RolloutSampling): Policy {
    const table = this.logits.arraySync() as number[][];
    return {
      id: 'toy-bigram',
      version: this.hash,
      encode: {
        // A context a ToolEnv writes (the step-level MDP) reads as the history would: each action
        // as its token, each observation as its token.
        prompt: (messages) => [
          BOS,
          ...messages
            .slice(1)
            .map((m) =>
              m.role === 'assistant'
                ? Math.max(0, [...Array(VOCAB).keys()].find((tok) => tokenText(tok) === m.content) ?? ERR)
                : /^[0-3]$/.test(m.content.trim())
                  ? OBS[Number(m.content.trim())]!
                  : ERR,
            ),
        ],
        observation: (text) => (/^[0-3]$/.test(text.trim()) ? [OBS[Number(text.trim())]!] : [ERR]),
      },
      act: async (req) => {
        const last = req.tokens![req.tokens!.length - 1]!;
        const row = table[last]!;
        const max = Math.max(...row);
        const logZ = max + Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
        let tok: number;
        if (sampling.temperature === 0) tok = row.indexOf(max);
        else {
          const scaled = row.map((x) => x / sampling.temperature);
          const m = Math.max(...scaled);
          const w = scaled.map((x) => Math.exp(x - m));
          const total = w.reduce((a, b) => a + b, 0);
          let u = createRng(req.seed).next() * total;
          tok = w.length - 1;
          for (let i = 0; i < w.length; i++) {
            u -= w[i]!;
            if (u < 0) {
              tok = i;
              break;
            }
          }
        }
        return { text: tokenText(tok), tokens: [tok], logprobs: [row[tok]! - logZ] };
      },
    };
  }

  async weightsChanged(): Promise<void> {
    this.hash = this.hashWeights();
  }

  /** The toy runs on wasm or cpu only, where a synchronous read is fine. */
  private hashWeights(): string {
    const h = createHash('sha256');
    for (const v of this.variables) h.update(new Uint8Array((v.dataSync() as Float32Array).slice().buffer));
    return h.digest('hex').slice(0, 16);
  }

  version(): string {
    return this.hash;
  }

  async save(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    const data = this.variables.map((v) =>
      Buffer.from((v.dataSync() as Float32Array).slice().buffer).toString('base64'),
    );
    await writeFile(join(dir, 'toy.json'), JSON.stringify({ data }));
  }

  async load(dir: string): Promise<void> {
    const { data } = JSON.parse(await readFile(join(dir, 'toy.json'), 'utf8')) as { data: string[] };
    this.variables.forEach((v, i) => {
      const buf = Buffer.from(data[i]!, 'base64');
      tf.tidy(() =>
        v.assign(tf.tensor(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4).slice(), v.shape)),
      );
    });
    await this.weightsChanged();
  }

  async freeze() {
    const copy = new BigramPolicy(tf.variable(this.logits.clone(), false), tf.variable(this.value.clone(), false));
    return {
      score: (r: ScoreRequest) => copy.score(r),
      maxLength: copy.maxLength,
      dispose: () => tf.dispose(copy.variables),
    };
  }

  dispose(): void {
    tf.dispose(this.variables);
  }
}

interface ToyTask extends Task {
  meta: { secret: number };
}

const peek = tool({
  name: 'peek',
  description: 'Reveal the secret digit.',
  parameters: z.object({}),
  execute: (_args, ctx) => String((ctx.task as ToyTask).meta.secret),
});

const env: ToolEnv<ToyTask> = {
  prompt: () => [{ role: 'user', content: 'Find the secret digit and answer it.' }],
  step: ({ action, results, history }) => {
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid') return { observation: 'invalid', reward: -0.1, done: false };
    // a process reward for the first successful peek
    const first = !history.some((t) => t.action.kind === 'tool_calls');
    return { observation: results[0]!.content, reward: results[0]!.ok && first ? 0.1 : 0, done: false };
  },
  outcome: ({ task, answer }) => {
    const success = answer !== null && answer.trim() === String(task.meta.secret);
    return { reward: success ? 1 : 0, success, metrics: { em: success ? 1 : 0 } };
  },
};

/** The toy scenario; `failEvery` makes every n-th task's tool throw an uncaught error in the env (a failed episode). */
export function toyScenario(options: { failEvery?: number } = {}): Scenario<ToyTask> {
  return {
    id: 'toy-peek',
    version: '1',
    description: 'peek at a secret digit, then answer it',
    splits: ['train', 'dev'],
    options: {},
    tasks: ({ split, seed, count }) => {
      const rng = createRng(`${seed}:${split}`);
      return Array.from({ length: Math.min(count, 64) }, (_, i) => ({
        id: `${split}-${i}`,
        split,
        question: 'secret?',
        meta: { secret: rng.int(0, 3), fail: options.failEvery !== undefined && i % options.failEvery === 0 },
      })) as ToyTask[];
    },
    tools: [peek],
    env: options.failEvery
      ? {
          ...env,
          step: (input) => {
            if ((input.task.meta as { fail?: boolean }).fail) throw new Error('toy env crashed');
            return env.step(input);
          },
        }
      : env,
    policies: {},
    episode: { maxTurns: 3, maxTokensPerTurn: 4, maxTotalTokens: 16 },
  };
}

/** A scratch folder for a training run. */
export const tmp = () => mkdtemp(join(tmpdir(), 'agent-r1-train-'));

/** The toy scenario's training config (GRPO, seed 7, 10 steps), with overrides. */
export const toyConfig = (over: Partial<TrainConfig> = {}): TrainConfig =>
  resolveConfig({
    algo: 'grpo',
    seed: 7,
    steps: 10,
    tasksPerStep: 8,
    group: 4,
    minibatch: 32,
    epochs: 1,
    lr: 1,
    evalEvery: 5,
    evalEpisodes: 32,
    checkpointEvery: 5,
    taskPool: 64,
    ...over,
  });

/** A run's metrics rows without their wall-clock times, for comparing two runs. */
export const withoutTime = (rows: unknown[]) => rows.map((r) => ({ ...(r as object), time: undefined }));

export const readJsonl = async (p: string) =>
  (await readFile(p, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
