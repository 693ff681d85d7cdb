import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { collect, integer, RECORD_SCENARIO_HELP } from '../common.ts';

interface ViewFlags {
  port: number;
  host: string;
  scenario: string[];
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

export function register(program: Command): void {
  program
    .command('view')
    .description('open a local web viewer on run directories: curves, eval tables, episodes, replay, GRPO groups')
    .argument(
      '<dirs...>',
      'run directories (episodes.jsonl, summary.json, metrics.jsonl, eval*.json); several are overlaid',
    )
    .option('--port <n>', 'port (0: any free port)', integer, 8377)
    .option(
      '--host <address>',
      'address to bind (default 127.0.0.1; anything else exposes your runs to the network)',
      '127.0.0.1',
    )
    .option('--scenario <dir>', RECORD_SCENARIO_HELP, collect, [])
    .action(async (dirs: string[], flags: ViewFlags) => {
      if (!LOOPBACK.has(flags.host)) {
        process.stderr.write(
          `warning: binding to ${flags.host}: anyone who can reach this address can read these runs (the viewer has no authentication)\n`,
        );
      }
      const t = performance.now();
      // Loaded on use: the viewer pulls in the chart library, which other commands do not need.
      const { startViewer } = await import('../../view/server.ts');
      const viewer = await startViewer({
        dirs,
        host: flags.host,
        port: flags.port,
        scenarios: builtinScenarios,
        scenario: flags.scenario,
      });
      process.stderr.write(
        `indexed ${dirs.length} run${dirs.length > 1 ? 's' : ''} in ${((performance.now() - t) / 1000).toFixed(1)} s\n`,
      );
      process.stdout.write(`viewer: ${viewer.url}/\n`);
      const stop = () => {
        void viewer.close().finally(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
