import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { MissingOptionalDependencyError } from '../../core/optional-import.ts';
import { loadScenario } from '../../scenario/load.ts';
import type { Scenario } from '../../scenario/scenario.ts';
import { printJson } from '../common.ts';

export function register(program: Command): void {
  program
    .command('scenarios')
    .description('list the built-in scenarios with their descriptions, tools and splits')
    .option('--json', 'print the list as JSON')
    .action(async (flags: { json?: boolean }) => {
      const rows = [];
      for (const name of Object.keys(builtinScenarios)) {
        let s: Scenario;
        try {
          s = await loadScenario(name, builtinScenarios);
        } catch (err) {
          // Dataset scenarios cannot be built without their file, others without an optional package
          // that is not installed; list them with what they need.
          const why = err instanceof Error ? err.message : String(err);
          const needs = err instanceof MissingOptionalDependencyError ? 'not installed' : 'needs options';
          rows.push({
            name,
            version: '',
            description: `(${needs}) ${why}`,
            tools: [] as string[],
            splits: [] as string[],
            policies: [] as string[],
            worldMachine: null,
          });
          continue;
        }
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
        if (!r.version) {
          process.stdout.write(`${r.name}\n  ${r.description}\n`);
          continue;
        }
        process.stdout.write(
          `${r.name} (v${r.version})\n  ${r.description}\n  tools: ${r.tools.join(', ')} | splits: ${r.splits.join(', ')} | policies: ${r.policies.join(', ')}${r.worldMachine ? ` | world machine: ${r.worldMachine}` : ''}\n`,
        );
      }
    });
}
