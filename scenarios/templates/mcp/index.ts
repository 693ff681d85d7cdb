import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import {
  createRng,
  defineScenario,
  deriveSeed,
  formatInvalidAction,
  formatResults,
  toolsSystemPrompt,
  type Policy,
  type Scenario,
  type Task,
  type TaskQuery,
} from 'agent-r1-ts';
import { McpServer, mcpEnv, mcpTools, type McpState } from 'agent-r1-ts/mcp';

const require = createRequire(import.meta.url);
/** The installed server package (its own version: the server reports a label of its own). */
const SERVER_PACKAGE = require('@modelcontextprotocol/server-memory/package.json') as { version: string };

// The MCP server, in this one place: any stdio server works ({ url } for one over Streamable HTTP).
// This one, @modelcontextprotocol/server-memory, keeps a knowledge graph in one file: each episode's
// server gets a file of its own in its scratch folder, and servers are started ahead ("spare").
const server = new McpServer({
  command: process.execPath,
  args: [require.resolve('@modelcontextprotocol/server-memory/dist/index.js')],
  env: (dir) => ({ MEMORY_FILE_PATH: join(dir, 'memory.jsonl') }),
  label: 'server-memory',
  isolation: 'spare',
});

// Its tools as the agent's: the ones this task needs, checked against the server's JSON Schemas.
const { tools, server: info } = await mcpTools(server, {
  include: ['create_entities', 'add_observations', 'read_graph'],
});

/** A fact to remember about a person the memory may already know. */
interface FactTask extends Task {
  meta: { person: string; fact: string; known: string[] };
}

const PEOPLE = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Donald', 'Frances', 'Ken'];
const FACTS = ['works at the harbour', 'plays the cello', 'lives in Lyon', 'keeps bees', 'runs marathons'];

// Seeded tasks: the same {split, seed, count} always give the same tasks (never Math.random).
function tasks({ split, seed, count }: TaskQuery): FactTask[] {
  return Array.from({ length: count }, (_, i) => {
    const rng = createRng(deriveSeed('facts', split, seed, i));
    const known = rng.shuffle(PEOPLE).slice(0, 2);
    const person = rng.pick(PEOPLE);
    const fact = rng.pick(FACTS);
    return {
      id: `${split}-${seed}-${i}`,
      split,
      question: `Remember: ${person} ${fact}.`,
      meta: { person, fact, known },
    };
  });
}

/** The memory file's entities (one JSON object a line), as the server writes it. */
function entities(text: string | undefined): Array<{ name: string; observations: string[] }> {
  return (text ?? '')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .filter((item) => item.type === 'entity');
}

// The ToolEnv, with the episode's server from mcpEnv: `setup` writes what the memory knows at the
// start; `state.mcp.files` is the folder as the calls left it (live, and in replay with no server).
const env = mcpEnv<FactTask>(server, {
  setup: (task, dir) => {
    const lines = task.meta.known.map((name) =>
      JSON.stringify({ type: 'entity', name, entityType: 'person', observations: [] }),
    );
    writeFileSync(join(dir, 'memory.jsonl'), lines.join('\n'));
  },
  prompt: (task, tools) => [
    { role: 'system', content: toolsSystemPrompt('Keep the memory up to date. Answer "noted" when done.', tools) },
    { role: 'user', content: task.question },
  ],
  step: ({ action, results }) => {
    if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
    if (action.kind === 'invalid') return { observation: formatInvalidAction(action), reward: -0.1, done: false };
    return { observation: formatResults(results), reward: 0, done: false };
  },
  outcome: ({ task, state }) => {
    const person = entities(state.mcp.files['memory.jsonl']).find((e) => e.name === task.meta.person);
    const success = person?.observations.includes(task.meta.fact) === true;
    return { reward: success ? 1 : 0, success };
  },
});

const call = (name: string, args: object) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

// A reference policy: looks at the memory, then adds the fact to a known person or makes a new one.
const expert: Policy = {
  id: 'expert',
  version: '1',
  act: async ({ task, turn }) => {
    const { person, fact, known } = (task as FactTask).meta;
    if (turn === 0) return { text: call('read_graph', {}) };
    if (turn === 1)
      return {
        text: known.includes(person)
          ? call('add_observations', { observations: [{ entityName: person, contents: [fact] }] })
          : call('create_entities', { entities: [{ name: person, entityType: 'person', observations: [fact] }] }),
      };
    return { text: '<answer>noted</answer>' };
  },
};

const scenario: Scenario<FactTask, McpState> = {
  id: 'facts',
  // Records say which server played: its name and version from its initialize answer, and the npm
  // package's version, which the server's own label does not follow.
  version: `1+${info.name}@${info.version}+npm@${SERVER_PACKAGE.version}`,
  description: 'Remember facts about people in the MCP memory server.',
  splits: ['train', 'dev', 'test'],
  options: {},
  tasks,
  tools,
  env,
  policies: { expert: () => expert },
  episode: { maxTurns: 4 },
};

export default defineScenario(scenario);
