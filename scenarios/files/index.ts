import {
  canonicalJson,
  defineScenario,
  formatInvalidAction,
  formatResults,
  type EpisodeRecord,
  type Scenario,
  type Summarizer,
  type ToolEnv,
} from 'agent-r1-ts';
import { mcpEnv, mcpTools, writeFolder, type McpIsolation, type McpServer, type McpState } from 'agent-r1-ts/mcp';
import { expert, random } from './policies.ts';
import { filesystemPackage, filesystemServer } from './server.ts';
import { filesTasks, ROOT, SPLITS, type FilesTask } from './tasks.ts';

export const FILES_REWARDS = {
  /** The folder ends exactly as the task asks. */
  done: 1,
  /** An action that is neither a well-formed call nor an answer. */
  invalidAction: -0.1,
  /** A call that failed (unknown tool, bad arguments, the server's error). */
  toolError: -0.05,
};

/**
 * The tools the agent gets, by the server's names, with short descriptions for small models. Left
 * out: list_directory, directory_tree and search_files (their output follows the filesystem's own
 * readdir order, which differs between machines: records would too), get_file_info (timestamps),
 * read_media_file, read_file (deprecated) and list_allowed_directories (the agent's folder is given).
 */
const TOOLS = {
  list_directory_with_sizes: 'List a folder (sorted by name).',
  read_text_file: 'Read a file.',
  read_multiple_files: 'Read several files at once.',
  write_file: 'Write a file (replaces it).',
  edit_file: 'Replace text in a file.',
  create_directory: 'Make a folder.',
  move_file: 'Move or rename a file.',
};

function instructions(tools: Parameters<ToolEnv['prompt']>[1]): string {
  const lines = tools.map((t) => {
    const schema = t.function.parameters as { properties?: object; required?: string[] };
    const args = Object.keys(schema.properties ?? {})
      .map((k) => (schema.required?.includes(k) ? k : `${k}?`))
      .join(', ');
    return `${t.function.name}(${args}): ${t.function.description}`;
  });
  return [
    `You manage the files under ${ROOT}. Tools:`,
    ...lines,
    'Call: <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>. When the task is done: <answer>done</answer>.',
  ].join('\n');
}

/** Writes a task's starting folder (never outside it: in replay the task comes from a record). */
function writeTree(task: FilesTask, dir: string): Promise<void> {
  return writeFolder(dir, task.meta.initial);
}

export function filesEnv(server: McpServer): ToolEnv<FilesTask, McpState> {
  return mcpEnv<FilesTask>(server, {
    setup: (task, dir) => writeTree(task, dir),
    prompt: (task, tools) => [
      { role: 'system', content: instructions(tools) },
      { role: 'user', content: task.question },
    ],
    step: ({ action, results }) => {
      if (action.kind === 'invalid')
        return { observation: formatInvalidAction(action), reward: FILES_REWARDS.invalidAction, done: false };
      if (action.kind === 'answer') return { observation: null, reward: 0, done: true };
      const failed = results.filter((r) => !r.ok).length;
      return { observation: formatResults(results), reward: failed * FILES_REWARDS.toolError, done: false };
    },
    // The folder as the calls left it: tracked live, rebuilt from the records' effects in replay.
    outcome: ({ task, state }) => {
      const match = canonicalJson(state.mcp.files) === canonicalJson(task.meta.expected);
      return { reward: match ? FILES_REWARDS.done : 0, success: match, metrics: { tree_match: match ? 1 : 0 } };
    },
  });
}

/** Success rate per task kind (find-move, rename, append). */
function summarizer(): Summarizer<{ [key: string]: unknown }, { kind: string; success: boolean }> {
  const kinds = new Map<string, { n: number; success: number }>();
  return {
    digest: (record: EpisodeRecord) => ({ kind: record.task.type ?? 'unknown', success: record.outcome.success }),
    add({ kind, success }) {
      let sums = kinds.get(kind);
      if (!sums) kinds.set(kind, (sums = { n: 0, success: 0 }));
      sums.n++;
      sums.success += success ? 1 : 0;
    },
    result() {
      const byKind: { [kind: string]: { n: number; success: number } } = {};
      for (const kind of [...kinds.keys()].sort()) {
        const sums = kinds.get(kind)!;
        byKind[kind] = { n: sums.n, success: sums.success / sums.n };
      }
      return { byKind };
    },
  };
}

/** The scenario on a given server (the benchmark compares isolation modes with it). */
export async function filesScenario(
  isolation: McpIsolation = 'roots',
  extra: { maxServers?: number; spares?: number } = {},
) {
  const server = filesystemServer(isolation, extra);
  const { tools, server: info } = await mcpTools(server, {
    include: Object.keys(TOOLS),
    describe: TOOLS,
    // write_file over an existing file goes through a temporary file with a random name, which its
    // error messages name: one name for all, or two runs of an episode would differ.
    normalize: (text) => text.replace(/\.[0-9a-f]{32}\.tmp\b/g, '.TEMP.tmp'),
  });
  const scenario: Scenario<FilesTask, McpState> = {
    id: 'files',
    // Records say which server played: its name and version from initialize (the catalog's), and the
    // npm package's version, which the server's own label does not follow.
    version: `1+${info.name}@${info.version}+npm@${filesystemPackage().version}`,
    description:
      'File chores on the real MCP filesystem server (@modelcontextprotocol/server-filesystem), each episode in a folder of its own: ' +
      'find a file by what it mentions and move it, rename by a rule, add a line to the right note; outcome = the final tree equals the expected one.',
    splits: SPLITS,
    options: {},
    tasks: ({ split, seed, count }) => filesTasks(split, seed, count),
    tools,
    env: filesEnv(server),
    policies: { expert: () => expert, random: () => random },
    episode: { maxTurns: 6, maxTokensPerTurn: 160, maxTotalTokens: 2048, maxToolOutputChars: 1024 },
    summarizer,
  };
  return { scenario, server };
}

export default defineScenario((await filesScenario()).scenario);
