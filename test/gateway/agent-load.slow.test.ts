import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { Task } from '../../src/core/types.ts';
import { loadAgent } from '../../src/gateway/agent-module.ts';
import { AgentSession } from '../../src/gateway/agent-session.ts';
import { DemonstratorAnswerer } from '../../src/gateway/demonstrator-answerer.ts';
import { cli } from '../helpers/cli.ts';
import { TRAINABLE_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';
import { BUILT, NOT_BUILT, node } from '../helpers/node-run.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';

/**
 * An agent as a user writes it, in a project `npm init -y` made (no "type": "module", no tsx of its
 * own), outside this repository: ES module syntax in a .ts file, in a .js file, and a .ts file that
 * imports a helper without its extension. Each loads with the package's own loader and runs.
 */
const project = mkdtempSync(join(tmpdir(), 'agent-r1-user-agent-'));
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'x', version: '1.0.0', main: 'index.js' }));

/** The agent's body: one request to the model through its client, rewarded when the answer is in it. */
const ASK = `
  const response = await fetch(\`\${client.baseURL}/chat/completions\`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: \`Bearer \${client.apiKey}\`, ...client.headers },
    body: JSON.stringify({ model: client.model, messages: [{ role: 'user', content: task.question }] }),
  });
  const text = (await response.json()).choices[0].message.content`;

const AGENTS: { [name: string]: { [file: string]: string } } = {
  ts: {
    'index.ts': `type Task = { question: string; answer?: string };
type Client = { baseURL: string; apiKey: string; model: string; headers: Record<string, string> };
export default async function agent(task: Task, client: Client): Promise<{ reward: number; success: boolean }> {${ASK} as string;
  const success = task.answer !== undefined && text.includes(task.answer);
  return { reward: success ? 1 : 0, success };
}
`,
  },
  js: {
    'index.js': `export default async function agent(task, client) {${ASK};
  const success = task.answer !== undefined && text.includes(task.answer);
  return { reward: success ? 1 : 0, success };
}
export const demonstrator = (task) => \`<answer>\${task.answer}</answer>\`;
`,
  },
  helper: {
    'judge.ts': `export function judge(text: string, answer?: string): { reward: number; success: boolean } {
  const success = answer !== undefined && text.includes(answer);
  return { reward: success ? 1 : 0, success };
}
`,
    'index.ts': `import { judge } from './judge';
export default async function agent(task: { question: string; answer?: string }, client: any) {${ASK} as string;
  return judge(text, task.answer);
}
`,
  },
};
for (const [name, files] of Object.entries(AGENTS)) {
  mkdirSync(join(project, name));
  for (const [file, text] of Object.entries(files)) writeFileSync(join(project, name, file), text);
}

const tasks = (calc.tasks({ split: 'test', seed: 91, count: 3 }) as Task[]).map((t) => ({
  id: t.id,
  question: t.question,
  answer: t.answer,
  split: 'test',
}));
const tasksFile = join(project, 'tasks.jsonl');
writeFileSync(tasksFile, tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');

for (const name of Object.keys(AGENTS)) {
  test(`loadAgent: the ${name} agent of a CommonJS-typed project loads and plays through the gateway`, async (t) => {
    const agent = await loadAgent(join(project, name));
    t.is(typeof agent.run, 'function');
    t.is(agent.demonstrator === undefined, name !== 'js');
    // The gateway answers with each task's answer: the agent's own code judges it, and its reward stands.
    const session = await AgentSession.open({ agent, tasks, seed: 1 });
    try {
      const answerer = new DemonstratorAnswerer((task) => `<answer>${task.answer}</answer>`, 'test', 'agent-r1');
      const records = await session.play({ answerer, tasks, group: 1, seed: 1 });
      t.deepEqual(
        records.map((r) => [r.status, r.totalReward, r.turns.length]),
        tasks.map(() => ['ok', 1, 1]),
      );
    } finally {
      await session.close();
    }
  });
}

test('dist/: the compiled package loads each agent with its own tsx, nothing registered before', (t) => {
  t.true(BUILT, NOT_BUILT);
  const script = `import { loadAgent } from './dist/src/gateway/index.js';
    const out = [];
    for (const name of ${JSON.stringify(Object.keys(AGENTS))}) {
      const agent = await loadAgent(${JSON.stringify(project)} + '/' + name);
      out.push([name, typeof agent.run, typeof agent.demonstrator]);
    }
    console.log(JSON.stringify(out));`;
  const r = node(['--input-type=module', '-e', script]);
  t.is(r.code, 0, r.stderr);
  // Node's own import would re-parse the .js as an ES module, with a warning on stderr: tsx loads it.
  t.is(r.stderr, '');
  t.deepEqual(JSON.parse(r.stdout), [
    ['ts', 'function', 'undefined'],
    ['js', 'function', 'function'],
    ['helper', 'function', 'undefined'],
  ]);
});

test.serial('eval --agent: each agent scored on a checkpoint through the CLI, records kept with --out', async (t) => {
  const { dir } = await calculatorCheckpoint();
  for (const name of Object.keys(AGENTS)) {
    const out = join(project, `eval-${name}`);
    const args = ['eval', '--agent', join(project, name), '--tasks', tasksFile, '--policy', `ckpt:${dir}`];
    const run = cli([...args, '--out', out, '--json']);
    t.is(run.code, 0, run.stderr);
    const summary = run.lastJson();
    t.like(summary, { split: 'test', episodes: 3, failed: 0, policy: `ckpt:${dir}` }, name);
    t.true(summary.successRate >= 0 && summary.successRate <= 1);
    const records = readFileSync(join(out, 'episodes.jsonl'), 'utf8').trim().split('\n');
    t.is(records.length, 3);
    t.deepEqual(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')), summary);
    // The text summary: what eval prints for a scenario.
    const text = cli([...args, '--episodes', '1']);
    t.is(text.code, 0, text.stderr);
    t.regex(text.stdout, /^episodes +1$/m);
    t.regex(text.stdout, /^successRate +\d/m);
    t.regex(text.stdout, /^meanReward +\d/m);
  }
});

test.serial('eval --agent on a Hugging Face folder (hf:DIR): the same summary', async (t) => {
  const dir = join(project, 'tiny-qwen3');
  await writeTinyFolder(dir, { ...TRAINABLE_QWEN3, seed: 3 });
  const args = ['eval', '--agent', join(project, 'ts'), '--tasks', tasksFile, '--policy', `hf:${dir}`];
  const run = cli([...args, '--episodes', '2', '--max-tokens-per-turn', '8', '--json']);
  t.is(run.code, 0, run.stderr);
  t.like(run.lastJson(), { split: 'test', episodes: 2, failed: 0, meanTurns: 1 });
});

test.serial('eval --agent: bad flags and files are usage errors, one line, exit 2', async (t) => {
  const agent = join(project, 'js');
  const usage = (args: string[], message: RegExp) => {
    const r = cli(['eval', ...args]);
    t.is(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    t.is(r.stderr.trim().split('\n').length, 1, r.stderr);
    t.regex(r.stderr, message);
  };
  usage(['--agent', agent, '--policy', 'ckpt:x'], /--tasks FILE\.jsonl: the tasks to evaluate .*js\/index\.js on/);
  usage(
    ['--agent', agent, '--scenario', 'calculator', '--policy', 'expert'],
    /give --scenario NAME or --agent FILE \(one of them\)/,
  );
  usage(['--policy', 'expert'], /give --scenario NAME or --agent FILE/);
  usage(
    ['--agent', agent, '--tasks', tasksFile, '--policy', 'ckpt:x', '--workers', '2'],
    /--workers: not with --agent/,
  );
  usage(['--scenario', 'calculator', '--policy', 'expert', '--tasks', tasksFile], /--tasks: goes with --agent/);
  usage(
    ['--agent', agent, '--tasks', tasksFile, '--policy', 'ckpt:x', '--split', 'dev'],
    /tasks\.jsonl has no tasks in the "dev" split \(the tasks eval plays\)/,
  );
  usage(['--agent', agent, '--tasks', tasksFile, '--policy', 'expert'], /policy to serve.*expert/);
});
