import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { cli } from '../helpers/cli.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// The AI SDK agent of examples/ai-sdk-agent on a Hugging Face model (Qwen3's architecture, tokenizer
// and template): warm-started with `sft --agent` until it calls the tool in its own syntax, then
// trained with `train --agent --init ckpt:`: the AI SDK sends its tool calls back (content null and
// tool messages) through the Qwen3 template, turn after turn, with no 500, and every record replays
// against the agent's code and against the model's template.

test.serial(
  'sft --agent then train --agent on a Qwen3 model: multi-turn AI SDK episodes through its template, replayed both ways',
  async (t) => {
    t.timeout(1_200_000);
    const root = mkdtempSync(join(tmpdir(), 'agent-r1-hf-agent-'));
    try {
      const dir = join(root, 'qwen3');
      await writeTinyFolder(dir, {
        architecture: 'Qwen3ForCausalLM',
        hidden: 64,
        layers: 2,
        heads: 4,
        kvHeads: 2,
        headDim: 16,
        intermediate: 128,
        seed: 7,
        embedStd: 0.1,
      });
      const lines = readFileSync('examples/ai-sdk-agent/tasks.jsonl', 'utf8').trim().split('\n');
      const pick = (split: string, n: number) => lines.filter((l) => l.includes(`"split":"${split}"`)).slice(0, n);
      const tasks = join(root, 'tasks.jsonl');
      writeFileSync(tasks, [...pick('train', 8), ...pick('test', 4)].join('\n') + '\n');
      const sftDir = join(root, 'sft');
      const sft = cli(
        [
          ...['sft', '--agent', 'examples/ai-sdk-agent', '--tasks', tasks, '--init', `hf:${dir}`],
          ...['--episodes', '24', '--steps', '60', '--batch-size', '4', '--lr', '5e-3', '--eval-episodes', '4'],
          ...['--out', sftDir, '--json'],
        ],
        { timeout: 900_000 },
      );
      t.is(sft.code, 0, sft.stderr);
      const s = sft.lastJson();
      t.true(s.finalLoss < 0.5, `SFT loss ${s.finalLoss}`);
      t.is(s.eval.failed, 0, 'no held-out episode failed (no 500)');
      t.true(s.eval.meanTurns >= 2, `the model calls the tool: ${s.eval.meanTurns} turns an episode`);
      t.log(`held-out success after sft --agent: ${s.eval.successRate} (${s.eval.episodes} episodes)`);
      const out = join(root, 'grpo');
      const train = cli(
        [
          ...[
            'train',
            '--agent',
            'examples/ai-sdk-agent',
            '--tasks',
            tasks,
            '--algo',
            'grpo',
            '--init',
            `ckpt:${sftDir}`,
          ],
          ...['--steps', '1', '--tasks-per-step', '2', '--group', '2', '--eval-every', '0', '--out', out, '--json'],
        ],
        { timeout: 600_000 },
      );
      t.is(train.code, 0, train.stderr);
      const records = readFileSync(join(out, 'episodes.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as EpisodeRecord);
      t.true(records.every((r) => r.status === 'ok'));
      const multi = records.filter((r) => r.turns.length >= 2);
      t.true(multi.length > 0, 'some episode has tool turns');
      // What the AI SDK sent back: the assistant's tool calls beside content null, then the tool's result.
      const sent = JSON.stringify(multi[0]!.turns[1]!.info);
      t.regex(sent, /"tool_calls":\[/);
      t.regex(sent, /"role":"tool"/);
      const byAgent = cli(['replay', '--agent', 'examples/ai-sdk-agent', join(out, 'episodes.jsonl'), '--json']);
      t.like(byAgent.lastJson(), { episodes: records.length, verified: records.length });
      const byTemplate = cli(['replay', '--policy', `ckpt:${sftDir}`, join(out, 'episodes.jsonl'), '--json']);
      t.like(byTemplate.lastJson(), { episodes: records.length, verified: records.length });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
);
