import type { Command } from 'commander';
import { builtinScenarios } from '../../../scenarios/index.ts';
import type { EpisodeRecord } from '../../core/types.ts';
import { readRecords } from '../../record/jsonl.ts';
import { replayRecord, type Divergence } from '../../replay/replay.ts';
import { loadRecordScenario } from '../../scenario/load.ts';
import type { Scenario } from '../../scenario/scenario.ts';
import { canonicalJson } from '../../core/canonical-json.ts';
import { NoRecordsError } from '../../core/errors.ts';
import { collect, EXIT_FAILED, printJson, RECORD_SCENARIO_HELP } from '../common.ts';
import { terminalText } from '../terminal-text.ts';
import { loadAgent, type AgentModule } from '../../gateway/agent-module.ts';
import { isAgentRecord } from '../../record/agent.ts';
import { checkAgentRecord, replayAgent } from '../../gateway/replay-agent.ts';
import { chatFormatFor } from '../../openai/chat-format.ts';
import { loadServedPolicy } from './serve.ts';

interface ReplayFlags {
  episode?: string;
  agent?: string;
  policy?: string;
  scenario: string[];
  liveTools?: boolean;
  json?: boolean;
  quiet?: boolean;
}

const clip = (s: string, n = 300) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** An episode turn by turn, as the replay saw it. */
function formatEpisode(record: EpisodeRecord): string {
  const lines = [
    `episode ${record.episodeId} (task ${record.task.id}, ${record.task.split})`,
    `  question: ${clip(record.task.question)}`,
  ];
  for (const turn of record.turns) {
    lines.push(`  turn ${turn.index + 1} [${turn.states.join(' → ')}]`);
    lines.push(`    action: ${clip(turn.text)}`);
    for (const r of turn.results) lines.push(`    ${r.name} → ${r.ok ? 'ok' : r.error?.kind}: ${clip(r.content)}`);
    if (turn.observation !== null) lines.push(`    observation: ${clip(turn.observation)}`);
    lines.push(`    process reward: ${turn.reward}`);
  }
  lines.push(
    `  answer: ${record.answer ?? '(none)'} | outcome ${record.outcome.reward} (${record.outcome.success ? 'success' : 'fail'}) | total ${record.totalReward} | ended: ${record.endReason}`,
  );
  return lines.join('\n');
}

function formatDivergence(d: Divergence): string {
  const call = d.call === undefined ? '' : `, call ${d.call + 1}${callName(d)}`;
  // Turns and calls counted from 1, as the viewer shows them.
  const where = d.turn === null ? 'episode' : `turn ${d.turn + 1}${call}`;
  const [expected, actual, from] = around(d.expected, d.actual);
  return `DIVERGED ${d.episodeId} at ${where}, field ${d.field}${from}\n    expected: ${expected}\n    actual:   ${actual}`;
}

/** Both values as JSON; two long strings from a little before where they first differ. */
function around(expected: unknown, actual: unknown): [string, string, string] {
  if (typeof expected !== 'string' || typeof actual !== 'string' || Math.max(expected.length, actual.length) <= 300)
    return [clip(canonicalJson(expected)), clip(canonicalJson(actual)), ''];
  let i = 0;
  while (i < expected.length && expected[i] === actual[i]) i++;
  const from = Math.max(0, i - 40);
  const part = (s: string) => `…${clip(JSON.stringify(s.slice(from)))}`;
  return [part(expected), part(actual), ` (from character ${i + 1})`];
}

function callName(d: Divergence): string {
  const result = (d.expected ?? d.actual) as { name?: unknown } | undefined;
  return typeof result?.name === 'string' ? ` (${result.name})` : '';
}

export function register(program: Command): void {
  program
    .command('replay')
    .description('re-drive every recorded episode through the machine and verify each state, observation and reward')
    .argument('<file>', 'an episodes.jsonl file')
    .option('--episode <id>', 'only this episode')
    .option('--live-tools', 're-execute the tools for real and report drift')
    .option(
      '--agent <file>',
      're-run this agent against the records of its gateway episodes (answers from the record; every request compared)',
    )
    .option(
      '--policy <ckpt:DIR|hf:DIR>',
      "gateway records: check each turn's prompt ids against this model's chat template",
    )
    .option('--scenario <dir>', RECORD_SCENARIO_HELP, collect, [])
    .option(
      '--quiet',
      'print only divergences, corrupt lines and the summary (no episode views, no line per verified episode)',
    )
    .option('--json', 'print {episodes, verified, diverged, corrupt} as the last stdout line')
    .action(async (file: string, flags: ReplayFlags) => {
      const agent = flags.agent === undefined ? undefined : await loadAgent(flags.agent);
      const format = flags.policy === undefined ? undefined : chatFormatFor(await loadServedPolicy(flags.policy));
      const scenarios = new Map<string, Promise<Scenario>>();
      const counts = { episodes: 0, verified: 0, diverged: 0, corrupt: 0 };
      let skipped = 0;
      const problems: Array<Divergence | { line: number; error: string }> = [];
      // Record text may hold escape sequences: the terminal sees them escaped, never obeyed.
      const say = (text: string) => {
        if (!flags.json) process.stdout.write(terminalText(text) + '\n');
      };
      for await (const item of readRecords(file)) {
        if ('error' in item) {
          counts.corrupt++;
          problems.push({ line: item.line, error: item.error.message });
          say(`CORRUPT ${item.error.message}`);
          continue;
        }
        const record = item.record;
        if (flags.episode !== undefined && record.episodeId !== flags.episode) {
          skipped++;
          continue;
        }
        counts.episodes++;
        if (agent || isAgentRecord(record)) {
          const divergence = agent ? await agentVerdict(agent, record) : checkAgentRecord(record, format);
          if (!flags.quiet) say(formatEpisode(record));
          if (divergence) {
            counts.diverged++;
            problems.push(divergence);
            say(formatDivergence(divergence));
          } else {
            counts.verified++;
            const note = record.policy.textOnly
              ? " (text-only: a teacher's answers, no ids to check)"
              : agent || format || !record.promptTokens
                ? ''
                : ' (its prompt ids unchecked: give --policy)';
            if (!flags.quiet) say(`verified ${record.episodeId}${note}`);
          }
          continue;
        }
        const key = canonicalJson(record.scenario);
        if (!scenarios.has(key))
          scenarios.set(key, loadRecordScenario(record.scenario, builtinScenarios, flags.scenario));
        const scenario = await scenarios.get(key)!;
        let result: Awaited<ReturnType<typeof replayRecord>>;
        try {
          result = await replayRecord(record, scenario, { liveTools: flags.liveTools });
        } catch (error) {
          // A sealed line whose content cannot be played (a config or task no run could have made):
          // its own verdict, and the lines after it are still checked.
          counts.episodes--;
          counts.corrupt++;
          const message = `line ${item.line}: episode ${record.episodeId} cannot be replayed: ${error instanceof Error ? error.message : String(error)}`;
          problems.push({ line: item.line, error: message });
          say(`CORRUPT ${message}`);
          continue;
        }
        if (!flags.quiet) say(formatEpisode(record));
        if (result.verified) {
          counts.verified++;
          if (!flags.quiet) say(`verified ${record.episodeId}`);
        } else {
          counts.diverged++;
          problems.push(result.divergence!);
          say(formatDivergence(result.divergence!));
        }
      }
      // Nothing replayed is not a pass: an empty file, or an --episode that is not there, says so.
      if (counts.episodes === 0 && (flags.episode !== undefined || counts.corrupt === 0))
        throw new NoRecordsError(file, flags.episode, skipped);
      if (flags.json) printJson({ ...counts, problems });
      else
        say(
          `\n${counts.episodes} episodes: ${counts.verified} verified, ${counts.diverged} diverged, ${counts.corrupt} corrupt lines`,
        );
      if (counts.diverged > 0 || counts.corrupt > 0) process.exitCode = EXIT_FAILED;
    });
}

/** An agent's episode re-run against its record: the first divergence, if any. */
async function agentVerdict(agent: AgentModule, record: EpisodeRecord): Promise<Divergence | undefined> {
  if (!isAgentRecord(record))
    return {
      episodeId: record.episodeId,
      turn: null,
      field: 'scenario.id',
      expected: 'agent',
      actual: record.scenario.id,
    };
  const [result] = await replayAgent(agent, [record]);
  return result?.divergence;
}
