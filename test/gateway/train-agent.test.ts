import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import OpenAI from 'openai';
import type { Task } from '../../src/core/types.ts';
import type { AgentFunction, AgentModule } from '../../src/gateway/agent-module.ts';
import { AgentSession } from '../../src/gateway/agent-session.ts';
import { DemonstratorAnswerer } from '../../src/gateway/demonstrator-answerer.ts';
import { resolveConfig } from '../../src/rl/config.ts';
import { GptTrainable } from '../../src/rl/tfjs-trainable.ts';
import { train } from '../../src/rl/trainer.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';

const tasks = (calc.tasks({ split: 'train', seed: 9, count: 4 }) as Task[]).map((t) => ({ ...t, split: 'train' }));
const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-train-agent-'));

/** A plain openai-client tool loop whose calculator answers every call. */
const loop: AgentFunction = async (task, client, { signal }) => {
  const openai = new OpenAI({
    baseURL: client.baseURL,
    apiKey: client.apiKey,
    defaultHeaders: client.headers,
    maxRetries: 0,
  });
  const tools: OpenAI.ChatCompletionTool[] = [
    {
      type: 'function',
      function: { name: 'calculate', parameters: { type: 'object', properties: { expression: { type: 'string' } } } },
    },
  ];
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: task.question }];
  for (let turn = 0; turn < 3; turn++) {
    const message = (
      await openai.chat.completions.create({ model: client.model, messages, tools, max_tokens: 24 }, { signal })
    ).choices[0]!.message;
    messages.push(message);
    if (!message.tool_calls?.length) return { reward: message.content?.includes(task.answer!) ? 1 : 0 };
    for (const call of message.tool_calls)
      messages.push({ role: 'tool', tool_call_id: call.id, content: task.answer! });
  }
  return { reward: 0.2 };
};
const agent: AgentModule = { run: loop, file: 'loop.ts', version: 'loop-1' };

async function run(out: string, stopAfter?: number, resume = false) {
  const { dir } = await calculatorCheckpoint();
  const session = await AgentSession.open({ agent, tasks, seed: 4 });
  try {
    const model = await GptTrainable.fromCheckpoint(dir);
    const config = resolveConfig({
      algo: 'grpo',
      seed: 4,
      steps: 3,
      tasksPerStep: 2,
      group: 2,
      minibatch: 4,
      lr: 0.01,
      evalEvery: 0,
      checkpointEvery: 1,
    });
    return await train({
      source: session.source(),
      model,
      config,
      outDir: out,
      resume,
      ...(stopAfter ? { stopAfter } : {}),
    });
  } finally {
    await session.close();
  }
}

test.serial(
  'train with an agent as the episode source: --resume gives the records and weights of an uninterrupted run',
  async (t) => {
    await run(join(tmp, 'whole'));
    await run(join(tmp, 'cut'), 1);
    await run(join(tmp, 'cut'), undefined, true);
    for (const file of ['episodes.jsonl', 'final/weights.bin'])
      t.deepEqual(readFileSync(join(tmp, 'cut', file)), readFileSync(join(tmp, 'whole', file)), file);
    const config = JSON.parse(readFileSync(join(tmp, 'whole', 'config.json'), 'utf8'));
    t.like(config.scenario, { id: 'agent', version: 'loop-1' });
  },
);

test('parallel tool calls: two calls in one answer, two tool messages back, one observation in the record', async (t) => {
  const session = await AgentSession.open({ agent, tasks, seed: 1 });
  try {
    const two =
      '<tool_call>{"name": "calculate", "arguments": {"expression": "1 + 1"}}</tool_call>\n<tool_call>{"name": "calculate", "arguments": {"expression": "2 + 2"}}</tool_call>';
    const demonstrator = (_task: Task, messages: readonly { role: string }[]) =>
      messages.some((m) => m.role === 'tool') ? '<answer>4</answer>' : two;
    const [record] = await session.play({
      answerer: new DemonstratorAnswerer(demonstrator, 'demo', 'agent-r1'),
      tasks: tasks.slice(0, 1),
      group: 1,
      seed: 1,
    });
    t.is(record!.status, 'ok');
    t.deepEqual(record!.turns[0]!.action, {
      kind: 'tool_calls',
      calls: [
        { name: 'calculate', arguments: { expression: '1 + 1' } },
        { name: 'calculate', arguments: { expression: '2 + 2' } },
      ],
    });
    t.is(record!.turns[0]!.observation, `[1] calculate: ${tasks[0]!.answer}\n[2] calculate: ${tasks[0]!.answer}`);
    t.is(record!.turns[1]!.context, undefined, 'the second request extends the first');
    t.is(record!.promptTokens, undefined, 'a demonstrator answers in text: no ids');
  } finally {
    await session.close();
  }
});
