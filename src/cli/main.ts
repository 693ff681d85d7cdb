import { Command, CommanderError } from 'commander';
import { EXIT_USAGE } from './exit-codes.ts';
import { exitWithFailure } from './failure.ts';

type CommandModule = { register(program: Command): void };

// Each command's module, by the name it registers, in the order help lists them. Only the one being run
// is loaded (a command's imports cost up to a second of start-up); help and unknown names load them all.
const COMMANDS: Record<string, () => Promise<CommandModule>> = {
  start: () => import('./commands/start.ts'),
  scenarios: () => import('./commands/scenarios.ts'),
  rollout: () => import('./commands/rollout.ts'),
  eval: () => import('./commands/eval.ts'),
  replay: () => import('./commands/replay.ts'),
  view: () => import('./commands/view.ts'),
  report: () => import('./commands/report.ts'),
  train: () => import('./commands/train.ts'),
  sft: () => import('./commands/sft.ts'),
  scenario: () => import('./commands/scenario-check.ts'),
  serve: () => import('./commands/serve.ts'),
  export: () => import('./commands/export.ts'),
  env: () => import('./commands/env.ts'),
  worker: () => import('./commands/worker.ts'),
  model: () => import('./commands/model.ts'),
};

const program = new Command('agent-r1')
  .description('Train, simulate, evaluate and replay LLM agents with multi-turn RL (the Agent-R1 formulation).')
  .showHelpAfterError()
  .showSuggestionAfterError()
  .exitOverride();

// Failures outside the command's own promise (a server's socket, a worker) end the same way: one line.
process.on('uncaughtException', exitWithFailure);
process.on('unhandledRejection', exitWithFailure);

const name = process.argv[2];
const loaders = name !== undefined && Object.hasOwn(COMMANDS, name) ? [COMMANDS[name]] : Object.values(COMMANDS);
for (const loaded of await Promise.all(loaders.map((load) => load()))) loaded.register(program);

// Every subcommand inherits the strictness: an unknown flag is an error, not silently ignored.
for (const command of program.commands) command.exitOverride().showHelpAfterError();

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version are "errors" to commander; they exit 0.
    process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE);
  }
  exitWithFailure(err);
}
