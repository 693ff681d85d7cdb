import { Option, type Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { EXPORT_FORMATS, exportRun, type ExportFormat } from '../../export/export-run.ts';
import { loadRecordScenario } from '../../scenario/load.ts';
import { collect, printJson, RECORD_SCENARIO_HELP } from '../common.ts';

interface ExportFlags {
  format: ExportFormat;
  out: string;
  scenario: string[];
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('export')
    .description(
      "write a run's episodes as training data: one row per episode with OpenAI-format messages, tools and rewards",
    )
    .argument('<run>', 'a run directory (with episodes.jsonl) or an episodes .jsonl file')
    .addOption(
      new Option('--format <format>', 'messages (JSONL) or parquet').choices(EXPORT_FORMATS).makeOptionMandatory(),
    )
    .requiredOption('--out <file>', 'the file to write')
    .option('--scenario <dir>', RECORD_SCENARIO_HELP, collect, [])
    .option('--json', 'print {rows, out, bytes} as the last stdout line')
    .action(async (run: string, flags: ExportFlags) => {
      const result = await exportRun({
        runDir: run,
        format: flags.format,
        out: flags.out,
        loadScenario: (id, options, source) =>
          loadRecordScenario({ id, options, source }, builtinScenarios, flags.scenario),
      });
      if (flags.json) printJson(result);
      else process.stdout.write(`exported ${result.rows} episodes to ${result.out} (${result.bytes} bytes)\n`);
    });
}
