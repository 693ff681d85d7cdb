import { InvalidArgumentError, Option, type Command } from 'commander';
import { episodeMachine } from '../../../machines/episode.ts';
import { builtinScenarios } from '../../../scenarios/index.ts';
import { UsageError } from '../../core/errors.ts';
import { checkScenarioDirInThread } from '../../app/check-in-thread.ts';
import { initScenarioProject, TEMPLATES, type Template } from '../../app/scenario-init.ts';
import { machineToMermaid } from '../../scenario/diagram.ts';
import { loadScenario } from '../../scenario/load.ts';
import { contextMode, EXIT_USAGE, integer, positiveInt, printJson } from '../common.ts';

/**
 * `agent-r1 scenario check DIR`: every problem of a user's scenario folder; exit 2 when there is one.
 * `agent-r1 scenario init DIR [--template T]`: a new scenario project of one's own.
 * `agent-r1 scenario diagram NAME|DIR [--episode]`: the world machine (or the episode machine) as Mermaid.
 */
interface CheckFlags {
  timeout: number;
  seed: number;
  episodes: number;
  expertSuccess: number;
  context?: string;
  json?: boolean;
}

function rate(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n >= 0 && n <= 1)) throw new InvalidArgumentError('expected a number from 0 to 1');
  return n;
}

export function register(program: Command): void {
  const scenario = program.command('scenario').description('work with a scenario folder of your own');
  scenario
    .command('check')
    .description(
      'load DIR/index.ts and name every problem: missing or ill-typed exports, invalid tool schemas, a world machine that does not start, a reference policy that cannot finish an episode, tasks or episodes that differ when run twice, records that do not replay; and warn when the expert fails its own tasks',
    )
    .argument('<dir>', 'the scenario folder (with an index.ts whose default export is the scenario)')
    .option(
      '--timeout <ms>',
      "the most time one policy episode may take, and scenario code may hold the check's thread without yielding",
      positiveInt,
      10_000,
    )
    .option('--seed <n>', 'seed of the tasks and episodes the check runs', integer, 0)
    .option('--episodes <n>', 'episodes per split each policy plays twice and replays', positiveInt, 2)
    .option(
      '--expert-success <rate>',
      'success rate below which the expert is a warning (a stochastic world may need less than 1)',
      rate,
      1,
    )
    .option(
      '--context <mode>',
      'play the episodes under this context mode (concat, window:K, card: what each step is shown), as a run with it would',
      contextMode,
    )
    .option('--json', 'print {ok, problems, warnings, checked, notChecked} as JSON on the last line')
    .exitOverride()
    .showHelpAfterError()
    .action(async (dir: string, flags: CheckFlags) => {
      // In a thread of its own, under a watchdog: scenario code that never yields cannot hang the check.
      const { problems, warnings, checked, notChecked } = await checkScenarioDirInThread(dir, {
        episodeTimeoutMs: flags.timeout,
        seed: flags.seed,
        episodesPerSplit: flags.episodes,
        expertSuccess: flags.expertSuccess,
        ...(flags.context === undefined ? {} : { config: { context: flags.context } }),
      });
      const ok = problems.length === 0 && warnings.length === 0;
      if (flags.json) {
        printJson({ dir, ok, problems, warnings, checked, notChecked });
      } else {
        const out = process.stdout;
        const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
        const found = [
          problems.length ? count(problems.length, 'problem') : '',
          warnings.length ? count(warnings.length, 'warning') : '',
        ].filter(Boolean);
        out.write(ok ? `${dir}: no problems\n` : `${dir}: ${found.join(', ')}\n`);
        for (const p of problems) out.write(`  ✗ ${p.where} [${p.kind}]: ${p.message}\n`);
        for (const w of warnings) out.write(`  ⚠ ${w.where} [${w.kind}]: ${w.message}\n`);
        for (const c of checked) out.write(`  ✓ ${c}\n`);
        for (const c of notChecked) out.write(`  - ${c}\n`);
      }
      // A policy that hung is still pending: exit now rather than wait on it.
      process.exit(ok ? 0 : EXIT_USAGE);
    });

  scenario
    .command('init')
    .description(
      'make a new scenario project in DIR: package.json (depending on agent-r1-ts, xstate, zod), tsconfig.json, a scenario that passes scenario check, a test, a README',
    )
    .argument('<dir>', 'the new project folder (must not exist, or be empty)')
    .addOption(
      new Option(
        '--template <name>',
        'minimal (one tool), world-machine (a world with states of its own) or mcp (tools from an MCP server)',
      )
        .choices(TEMPLATES)
        .default('world-machine'),
    )
    .option(
      '--package <spec>',
      'how to depend on agent-r1-ts: a checkout or an npm pack tarball (path), or an npm version (default: this checkout)',
    )
    .option('--json', 'print {dir, template, dependency, files} as JSON on the last line')
    .exitOverride()
    .showHelpAfterError()
    .action((dir: string, flags: { template: Template; package?: string; json?: boolean }) => {
      const made = initScenarioProject(dir, { template: flags.template, dependency: flags.package });
      if (flags.json) return printJson(made);
      process.stdout.write(
        `made ${made.dir} (template ${made.template}; agent-r1-ts from ${made.dependency}):\n` +
          made.files.map((f) => `  ${f}\n`).join('') +
          `next:\n  cd ${dir}\n  npm install\n  npx agent-r1 scenario check .\n  npm test\n`,
      );
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
      if (!name) throw new UsageError('name a scenario (or a folder), or pass --episode');
      const s = await loadScenario(name, builtinScenarios);
      // Asked for what the scenario does not have: a usage error, like an unknown name.
      if (!s.worldMachine)
        throw new UsageError(
          `scenario ${s.id} has no world machine: its episodes run on the episode machine alone (--episode draws that)`,
        );
      process.stdout.write(machineToMermaid(s.worldMachine));
    });
}
