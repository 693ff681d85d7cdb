import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { loadScenario } from '../../scenario/load.ts';
import { printJson } from '../common.ts';

export function register(program: Command): void {
  program
    .command('scenarios')
    .description('list the built-in scenarios with their descriptions, tools and splits')
    .option('--json', 'print the list as JSON')
    .action(async (flags: { json?: boolean }) => {
      const rows = [];
      for (const name of Object.keys(builtinScenarios)) {
        const s = await loadScenario(name, builtinScenarios);
        rows.push({
          name,
          version: s.version,
          description: s.description,
          tools: s.tools.map((t) => t.name),
          splits: [...s.splits],
          policies: Object.keys(s.policies),
          worldMachine: s.worldMachine ? (s.worldMachine.id ?? 'yes') : null,
        });
      }
      if (flags.json) return printJson(rows);
      for (const r of rows) {
        process.stdout.write(
          `${r.name} (v${r.version})\n  ${r.description}\n  tools: ${r.tools.join(', ')} | splits: ${r.splits.join(', ')} | policies: ${r.policies.join(', ')}${r.worldMachine ? ` | world machine: ${r.worldMachine}` : ''}\n`,
        );
      }
    });
}
