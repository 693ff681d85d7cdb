import { join } from 'node:path';
import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { writeOutput } from '../../core/write-output.ts';
import { collect, RECORD_SCENARIO_HELP } from '../common.ts';
import { terminalLine } from '../terminal-text.ts';

interface ReportFlags {
  out?: string;
  replay: boolean;
  scenario: string[];
}

export function register(program: Command): void {
  program
    .command('report')
    .description(
      'write one self-contained HTML report of a run (curves as inline SVG, tables, best/median/worst episodes)',
    )
    .argument('<dir>', 'run directory')
    .option('--out <file>', 'output file (default DIR/report.html)')
    .option('--no-replay', 'do not replay the example episodes')
    .option('--scenario <dir>', RECORD_SCENARIO_HELP, collect, [])
    .action(async (dir: string, flags: ReportFlags) => {
      const out = flags.out ?? join(dir, 'report.html');
      const { buildReport } = await import('../../view/report.ts');
      const report = await buildReport(dir, {
        replay: flags.replay,
        scenarios: builtinScenarios,
        scenario: flags.scenario,
        onWarning: (line) => process.stderr.write(`warning: ${terminalLine(line)}\n`),
      });
      writeOutput(out, report);
      process.stdout.write(`report: ${out} (${(Buffer.byteLength(report) / 1024).toFixed(0)} KiB)\n`);
    });
}
