// A Vercel AI SDK agent: a generateText loop with one tool, written as anyone would write it. The
// only line that knows about agent-r1 is the provider's baseURL, apiKey and headers, which come
// from `client` (in production: your own endpoint). `agent-r1 start --agent examples/ai-sdk-agent`
// trains the model behind it with GRPO; `agent-r1 train --agent examples/ai-sdk-agent/index.ts
// --tasks examples/ai-sdk-agent/tasks.jsonl …` does the same with every knob.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';

interface Task {
  id: string;
  question: string;
  answer?: string;
  meta?: { start?: number; steps?: { op: string; n: number }[] };
}

interface Client {
  baseURL: string;
  apiKey: string;
  model: string;
  headers: Record<string, string>;
}

const SYSTEM = 'Solve the word problem with the calculate tool, one operation per call, then give the final number.';

const calculate = tool({
  description: 'Evaluate an arithmetic expression: numbers, + - * / and parentheses.',
  inputSchema: z.object({ expression: z.string().describe('for example "12 * 3"') }),
  execute: async ({ expression }) => String(evaluate(expression)),
});

export default async function agent(task: Task, client: Client, options: { signal?: AbortSignal } = {}) {
  const provider = createOpenAICompatible({ name: 'agent-r1', ...client });
  const { text } = await generateText({
    model: provider(client.model),
    system: SYSTEM,
    prompt: task.question,
    tools: { calculate },
    stopWhen: stepCountIs(8),
    maxRetries: 0,
    abortSignal: options.signal,
  });
  const answer = /<answer>\s*(-?[\d.]+)\s*<\/answer>/.exec(text)?.[1] ?? /-?\d+(\.\d+)?/.exec(text)?.[0];
  const success = answer !== undefined && Number(answer) === Number(task.answer);
  return { reward: success ? 1 : 0, success };
}

/**
 * The warm start's teacher (optional, for training from scratch): what a model should answer, with
 * the habit of a weak model, which stops one operation early in 70% of its episodes and answers the
 * intermediate result. Reads the task's steps and the calculator's results so far.
 */
export function demonstrator(task: Task, messages: { role: string; content: string | null }[], seed: number): string {
  const steps = task.meta?.steps ?? [];
  const results = messages
    .filter((m) => m.role === 'tool' && /^-?\d+(\.\d+)?$/.test((m.content ?? '').trim()))
    .map((m) => Number(m.content));
  const stopsEarly = unitInterval(seed) < 0.7;
  const running = results.at(-1) ?? task.meta?.start ?? 0;
  if (results.length >= steps.length - (stopsEarly ? 1 : 0)) return `<answer>${running}</answer>`;
  const { op, n } = steps[results.length]!;
  return `<tool_call>${JSON.stringify({ name: 'calculate', arguments: { expression: `${running} ${op} ${n}` } })}</tool_call>`;
}

/** A number in [0, 1) from a seed (a 32-bit integer hash). */
function unitInterval(seed: number): number {
  let x = seed | 0;
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  return ((x ^ (x >>> 16)) >>> 0) / 2 ** 32;
}

/** Arithmetic on numbers, + - * / and parentheses; anything else is an error (model output is never run as code). */
export function evaluate(expression: string): number {
  const tokens = expression.match(/\d+(?:\.\d+)?|[-+*/()]|\S/g) ?? [];
  let at = 0;
  const fail = (why: string): never => {
    throw new Error(`cannot evaluate "${expression}": ${why}`);
  };
  const primary = (): number => {
    const t = tokens[at++];
    if (t === '(') {
      const value = sum();
      if (tokens[at++] !== ')') fail('a parenthesis is not closed');
      return value;
    }
    if (t === '-') return -primary();
    if (t === undefined || !/^\d/.test(t)) fail(t === undefined ? 'it ends too soon' : `unexpected "${t}"`);
    return Number(t);
  };
  const product = (): number => {
    let value = primary();
    while (tokens[at] === '*' || tokens[at] === '/')
      value = tokens[at++] === '*' ? value * primary() : value / primary();
    return value;
  };
  const sum = (): number => {
    let value = product();
    while (tokens[at] === '+' || tokens[at] === '-')
      value = tokens[at++] === '+' ? value + product() : value - product();
    return value;
  };
  const value = sum();
  if (at < tokens.length) fail(`unexpected "${tokens[at]}"`);
  return value;
}
