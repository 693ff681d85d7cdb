import { join } from 'node:path';
import type { Command } from 'commander';
import { UsageError } from '../../core/errors.ts';
import { writeOutput } from '../../core/write-output.ts';
import { EVAL_SPLIT_PURPOSE, evaluateAgent } from '../../app/agent-eval.ts';
import { loadAgent } from '../../gateway/agent-module.ts';
import { readTasksFile, tasksOfSplit } from '../../gateway/tasks-file.ts';
import { serializeRecord } from '../../record/record.ts';
import { formatSummary, positiveInt, printJson } from '../common.ts';
import { prepareOut, rolloutOptions, runRolloutCommand, type RolloutFlags } from './rollout.ts';
import { loadServedPolicy } from './serve.ts';

interface EvalFlags extends Omit<RolloutFlags, 'scenario'> {
  scenario?: string;
  agent?: string;
  tasks?: string;
  agentTimeout: number;
}

/** Flags of a scenario's eval that an agent's has no use for: the agent plays its own episodes, here. */
const SCENARIO_ONLY = [
  'data',
  'option',
  'context',
  'maxTotalTokens',
  'group',
  'workers',
  'concurrency',
  'maxBatch',
  'queue',
  'chunk',
  'queueTimeout',
  'resume',
  'passK',
];

export function register(program: Command): void {
  const command = rolloutOptions(
    program
      .command('eval')
      .description("run a policy on a split and print the scenario's metrics (or an agent's: --agent, no training)"),
    true,
    'test',
    false,
  )
    .option(
      '--agent <file>',
      "instead of a scenario: an agent module (or its folder), its episodes through the gateway on --tasks' split; --policy ckpt:DIR or hf:DIR answers its client",
    )
    .option('--tasks <file.jsonl>', "with --agent: the tasks (default: tasks.jsonl in the agent's folder)")
    .option(
      '--agent-timeout <s>',
      'with --agent: an agent run past this many seconds is written as failed',
      positiveInt,
      120,
    )
    .option(
      '--pass-k <K>',
      "run each of --episodes tasks K times (derived seeds) and report τ-bench's pass^k and pass@k for k = 1..K",
      positiveInt,
    )
    .option('--out <dir>', 'also write the records here');
  command.action(async (flags: EvalFlags) => {
    if ((flags.scenario === undefined) === (flags.agent === undefined))
      throw new UsageError('give --scenario NAME or --agent FILE (one of them): what is evaluated');
    const summary =
      flags.agent === undefined
        ? await scenarioEval(flags, command)
        : await evalAgent({ ...flags, agent: flags.agent }, command);
    if (flags.json) printJson(summary);
    else process.stdout.write(formatSummary(summary) + '\n');
  });
}

function scenarioEval(flags: EvalFlags, command: Command) {
  const agentOnly = (['tasks', 'agentTimeout'] as const).filter((name) => command.getOptionValueSource(name) === 'cli');
  if (agentOnly.length > 0)
    throw new UsageError(`${agentOnly.map((n) => flagName(command, n)).join(', ')}: goes with --agent, not --scenario`);
  if (flags.passK !== undefined && command.getOptionValueSource('group') === 'cli')
    throw new UsageError('--pass-k K runs each task K times: not with --group');
  if (flags.passK !== undefined && flags.queue)
    throw new UsageError('--pass-k: not with --queue (the runs are counted as they finish, in this process)');
  return runRolloutCommand({ ...flags, scenario: flags.scenario! });
}

/** The long flag of an option, by its attribute name (for errors naming what the user typed). */
function flagName(command: Command, attribute: string): string {
  return command.options.find((o) => o.attributeName() === attribute)?.long ?? attribute;
}

/** `eval --agent FILE --policy M`: the agent's own runs of a split's tasks against a model, scored. */
async function evalAgent(flags: EvalFlags & { agent: string }, command: Command) {
  const given = SCENARIO_ONLY.filter((name) => {
    const source = command.getOptionValueSource(name);
    return source === 'cli' || source === 'env';
  });
  if (given.length > 0)
    throw new UsageError(
      `${given.map((n) => flagName(command, n)).join(', ')}: not with --agent (the agent plays its own episodes, one per task)`,
    );
  if (flags.out) prepareOut(flags.out, flags.force);
  const agent = await loadAgent(flags.agent);
  const tasksFile = flags.tasks ?? agent.tasksFile;
  if (!tasksFile)
    throw new UsageError(
      `--tasks FILE.jsonl: the tasks to evaluate ${agent.file} on (it has no tasks.jsonl beside it)`,
    );
  const tasks = await readTasksFile(tasksFile);
  // Before the model loads: a file without the split is refused at once.
  tasksOfSplit(tasks, flags.split, tasksFile, EVAL_SPLIT_PURPOSE);
  const policy = await loadServedPolicy(flags.policy, { temperature: flags.temperature, dtype: flags.dtype });
  process.stderr.write(`agent: ${agent.file} (version ${agent.version}), ${flags.split} tasks from ${tasksFile}\n`);
  const { records, summary } = await evaluateAgent({
    agent,
    tasks,
    tasksFile,
    split: flags.split,
    episodes: flags.episodes,
    seed: flags.seed,
    policy,
    timeoutMs: flags.agentTimeout * 1000,
    maxTurns: flags.maxTurns,
    maxTokensPerTurn: flags.maxTokensPerTurn,
  });
  const result = { agent: agent.file, policy: flags.policy, split: flags.split, ...summary };
  if (flags.out) {
    // Written whole (--force replaces an earlier run's records, never adds to them).
    writeOutput(join(flags.out, 'episodes.jsonl'), records.map((r) => serializeRecord(r) + '\n').join(''));
    writeOutput(join(flags.out, 'summary.json'), JSON.stringify(result, null, 2) + '\n');
  }
  return result;
}
