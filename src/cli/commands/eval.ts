import type { Command } from 'commander';
import { formatSummary, printJson } from '../common.ts';
import { rolloutOptions, runRolloutCommand, type RolloutFlags } from './rollout.ts';

export function register(program: Command): void {
  rolloutOptions(
    program.command('eval').description("run a policy on a split and print the scenario's metrics"),
    true,
    'test',
  )
    .option('--out <dir>', 'also write the records here')
    .action(async (flags: RolloutFlags) => {
      const summary = await runRolloutCommand(flags);
      if (flags.json) printJson(summary);
      else process.stdout.write(formatSummary(summary) + '\n');
    });
}
