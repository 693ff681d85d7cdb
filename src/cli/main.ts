import { Command, CommanderError } from 'commander';
import { EXIT_USAGE } from './exit-codes.ts';
import { exitWithFailure } from './failure.ts';
import { register as registerScenarios } from './commands/scenarios.ts';
import { register as registerRollout } from './commands/rollout.ts';
import { register as registerEval } from './commands/eval.ts';
import { register as registerReplay } from './commands/replay.ts';
import { register as registerStart } from './commands/start.ts';
import { register as registerView } from './commands/view.ts';
import { register as registerReport } from './commands/report.ts';
import { register as registerSft } from './commands/sft.ts';
import { register as registerTrain } from './commands/train.ts';
import { register as registerScenarioCheck } from './commands/scenario-check.ts';
import { register as registerServe } from './commands/serve.ts';
import { register as registerExport } from './commands/export.ts';
import { register as registerEnv } from './commands/env.ts';
import { register as registerWorker } from './commands/worker.ts';

const program = new Command('agent-r1')
  .description('Train, simulate, evaluate and replay LLM agents with multi-turn RL (the Agent-R1 formulation).')
  .showHelpAfterError()
  .showSuggestionAfterError()
  .exitOverride();

for (const register of [
  registerStart,
  registerScenarios,
  registerRollout,
  registerEval,
  registerReplay,
  registerView,
  registerReport,
  registerTrain,
  registerSft,
  registerScenarioCheck,
  registerServe,
  registerExport,
  registerEnv,
  registerWorker,
])
  register(program);

// Every subcommand inherits the strictness: an unknown flag is an error, not silently ignored.
for (const command of program.commands) command.exitOverride().showHelpAfterError();

// Failures outside the command's own promise (a server's socket, a worker) end the same way: one line.
process.on('uncaughtException', exitWithFailure);
process.on('unhandledRejection', exitWithFailure);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version are "errors" to commander; they exit 0.
    process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE);
  }
  exitWithFailure(err);
}
