import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { agentSequences } from '../../src/gateway/agent-sequences.ts';
import { recordedRequests } from '../../src/gateway/agent-record.ts';
import { chatFormatFor } from '../../src/openai/chat-format.ts';
import { loadHfPolicy } from '../../src/policy/hf/hf-policy.ts';
import { cli } from '../helpers/cli.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

// sft --agent and sft --records: a Hugging Face model (Qwen3's template) trained on an agent's
// demonstrations played through the gateway by the agent's own code (the AI SDK example), and on
// recorded episodes; each turn rendered with the model's template, the loss on the answers alone.
// In the slow suite: two CLI trainings and eight CLI runs, about 70 s of CPU.

const root = mkdtempSync(join(tmpdir(), 'agent-r1-sft-agent-'));
const dir = join(root, 'tiny-qwen3');
const tasks = join(root, 'tasks.jsonl');
test.before(async () => {
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 16,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 8,
    intermediate: 32,
    seed: 5,
    embedStd: 0.2,
  });
  const lines = readFileSync('examples/ai-sdk-agent/tasks.jsonl', 'utf8').trim().split('\n');
  const pick = (split: string, n: number) => lines.filter((l) => l.includes(`"split":"${split}"`)).slice(0, n);
  writeFileSync(tasks, [...pick('train', 4), ...pick('test', 2)].join('\n') + '\n');
});
test.after.always(() => rmSync(root, { recursive: true, force: true }));

const FAST = ['--steps', '2', '--batch-size', '2', '--lr', '1e-3'];

test.serial(
  "sft --agent: the demonstrator's episodes through the gateway train a Hugging Face checkpoint, scored on held-out tasks; sft --records trains on them again",
  (t) => {
    const out = join(root, 'sft');
    const a = cli(
      [
        'sft',
        '--agent',
        'examples/ai-sdk-agent',
        '--tasks',
        tasks,
        '--init',
        `hf:${dir}`,
        '--episodes',
        '4',
        ...FAST,
        '--eval-episodes',
        '2',
        '--out',
        out,
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(a.code, 0, a.stderr);
    const s = a.lastJson();
    t.like(s, { steps: 2, demonstrations: 4, init: `hf:${dir}`, eval: { episodes: 2, split: 'test' } });
    t.true(s.sequences >= 1 && s.sequences <= 4);
    t.like(JSON.parse(readFileSync(join(out, 'checkpoint.json'), 'utf8')), { format: 'agent-r1-hf', hash: s.hash });
    const demos = join(out, 'demonstrations.jsonl');
    t.true(existsSync(demos));
    // The same episodes, recorded, imitated again from the file (every one: --min-reward 0).
    const b = cli(
      [
        'sft',
        '--records',
        demos,
        '--min-reward',
        '0',
        '--init',
        `hf:${dir}`,
        ...FAST,
        '--out',
        join(root, 'sft-records'),
        '--json',
      ],
      { timeout: 300_000 },
    );
    t.is(b.code, 0, b.stderr);
    t.like(b.lastJson(), { steps: 2, imitated: 4, records: demos });
    t.regex(b.stderr, /imitating 4 of 4 episodes \(reward ≥ 0\)/);
  },
);

test.serial(
  'agentSequences: each turn is the template rendering of its request, earlier answers as their ids; the loss only on answers',
  async (t) => {
    const demos = join(root, 'sft', 'demonstrations.jsonl');
    const records = readFileSync(demos, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as EpisodeRecord);
    const policy = await loadHfPolicy(dir);
    const format = chatFormatFor(policy);
    const action = (text: string) => policy.encode.action(text);
    const record = records.find((r) => r.turns.length >= 2)!;
    const [sequence, ...more] = agentSequences([record], format, action);
    t.is(more.length, 0, 'an agent that appends to its history makes one sequence');
    const answers = record.turns.map((turn) => action(turn.text));
    t.is(
      sequence!.mask.reduce((a, b) => a + b, 0),
      answers.reduce((n, a) => n + a.length, 0),
    );
    // The last turn's prompt is where the sequence's last answer starts.
    const requests = recordedRequests(record);
    const last = requests.at(-1)!;
    let assistant = -1;
    const prompt = format.prompt(last.messages, (last.tools ?? []) as never, Infinity, (i) => {
      const k = last.messages.slice(0, i).filter((m) => m.role === 'assistant').length;
      assistant = Math.max(assistant, k);
      return answers[k];
    });
    t.deepEqual(sequence!.tokens.slice(0, prompt.length), prompt);
    t.deepEqual(sequence!.tokens.slice(prompt.length), answers.at(-1));
  },
);

test.serial('sft --agent and --records: bad flags and inputs are one-line usage errors', (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['sft', '--out', join(root, 'x')], /name what to imitate: --scenario S, --agent FILE or --records FILE/],
    [
      ['sft', '--agent', 'examples/ai-sdk-agent', '--records', tasks, '--init', `hf:${dir}`, '--out', join(root, 'x')],
      /--agent and --records cannot be combined/,
    ],
    [
      ['sft', '--agent', 'examples/ai-sdk-agent', '--out', join(root, 'x')],
      /--agent trains a Hugging Face model: give --init hf:DIR/,
    ],
    [['sft', '--scenario', 'calculator', '--tasks', tasks, '--out', join(root, 'x')], /--tasks goes with --agent/],
    [
      ['sft', '--records', tasks, '--min-reward', 'abc', '--init', `hf:${dir}`, '--out', join(root, 'x')],
      /expected a number/,
    ],
    [['sft', '--records', tasks, '--init', `hf:${dir}`, '--out', join(root, 'x')], /corrupt line/],
  ];
  for (const [args, message] of cases) {
    const r = cli(args, { timeout: 120_000 });
    t.is(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    t.regex(r.stderr, message);
  }
});
