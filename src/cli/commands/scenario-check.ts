import type { Command } from 'commander';
import { episodeMachine } from '../../../machines/episode.ts';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { AgentR1Error } from '../../core/errors.ts';
import { checkScenarioDir } from '../../app/check-scenario.ts';
import { machineToMermaid } from '../../scenario/diagram.ts';
import { loadScenario } from '../../scenario/load.ts';
import { EXIT_USAGE, integer, positiveInt, printJson } from '../common.ts';

/**
 * `agent-r1 scenario check DIR`: every problem of a user's scenario folder; exit 2 when there is one.
 * `agent-r1 scenario diagram NAME|DIR [--episode]`: the world machine (or the episode machine) as Mermaid.
 */
export function register(program: Command): void {
  const scenario = program.command('scenario').description('work with a scenario folder of your own');
  scenario
    .command('check')
    .description(
      'load DIR/index.ts and name every problem: missing or ill-typed exports, invalid tool schemas, a world machine that does not start, a reference policy that cannot finish an episode',
    )
    .argument('<dir>', 'the scenario folder (with an index.ts whose default export is the scenario)')
    .option('--timeout <ms>', 'the most time one policy episode may take', positiveInt, 10_000)
    .option('--seed <n>', 'seed of the tasks and episodes the check runs', integer, 0)
    .option('--json', 'print {problems, checked} as JSON on the last line')
    .exitOverride()
    .showHelpAfterError()
    .action(async (dir: string, flags: { timeout: number; seed: number; json?: boolean }) => {
      const { problems, checked } = await checkScenarioDir(dir, { episodeTimeoutMs: flags.timeout, seed: flags.seed });
      if (flags.json) {
        printJson({ dir, ok: problems.length === 0, problems, checked });
      } else {
        const out = process.stdout;
        out.write(
          problems.length === 0
            ? `${dir}: no problems\n`
            : `${dir}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n`,
        );
        for (const p of problems) out.write(`  ✗ ${p.where} [${p.kind}]: ${p.message}\n`);
        for (const c of checked) out.write(`  ✓ ${c}\n`);
      }
      // A policy that hung is still pending: exit now rather than wait on it.
      process.exit(problems.length === 0 ? 0 : EXIT_USAGE);
    });

  scenario
    .command('diagram')
    .description(
      "print a scenario's world machine (or, with --episode, the episode machine) as a Mermaid stateDiagram-v2, generated from the machine",
    )
    .argument('[scenario]', 'a built-in scenario name or a scenario folder')
    .option('--episode', 'draw the episode machine (machines/episode.ts) instead')
    .exitOverride()
    .showHelpAfterError()
    .action(async (name: string | undefined, flags: { episode?: boolean }) => {
      if (flags.episode) return void process.stdout.write(machineToMermaid(episodeMachine));
      if (!name) throw new AgentR1Error('name a scenario (or a folder), or pass --episode');
      const s = await loadScenario(name, builtinScenarios);
      if (!s.worldMachine) throw new AgentR1Error(`scenario ${s.id} has no world machine`);
      process.stdout.write(machineToMermaid(s.worldMachine));
    });
}
