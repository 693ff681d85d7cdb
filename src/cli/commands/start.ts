import type { Command } from 'commander';
import { formatSummary } from '../common.ts';
import { runRolloutCommand } from './rollout.ts';

/** The main job. Until the trainer lands: a rollout of the default scenario with its expert. */
export function register(program: Command): void {
  program
    .command('start')
    .description('the main job: a rollout of the default scenario')
    .option('--quick', 'a smaller run')
    .action(async (flags: { quick?: boolean }) => {
      const summary = await runRolloutCommand({
        scenario: 'calculator',
        split: 'test',
        policy: 'expert',
        episodes: flags.quick ? 20 : 200,
        seed: 0,
        group: 1,
        concurrency: 8,
        out: 'runs/start',
      });
      process.stdout.write(`${formatSummary(summary)}\nrecords: runs/start/episodes.jsonl\n`);
    });
}
