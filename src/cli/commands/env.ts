import { InvalidArgumentError, Option, type Command } from 'commander';
import { ACTION_FORMATS, type ActionFormat } from '../../core/types.ts';
import { UsageError } from '../../core/errors.ts';
import { isLoopback } from '../../core/http.ts';
import {
  DEFAULT_ENV_PORT,
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_MAX_SESSIONS,
  EnvServer,
} from '../../env-server/server.ts';
import { contextSetting } from '../../env/context.ts';
import {
  budget,
  CONTEXT_HELP,
  contextMode,
  keyValue,
  nonNegativeNumber,
  positiveInt,
  printJson,
  scenarioFromFlags,
} from '../common.ts';

interface EnvServeFlags {
  scenario: string;
  option: string[];
  data?: string;
  port: number;
  host: string;
  maxSessions: number;
  idleTimeout: number;
  record: string | false;
  apiKey?: string;
  maxMessageBytes: number;
  maxTurns?: number;
  maxTokensPerTurn?: number;
  maxTotalTokens?: number;
  context?: string;
  actionFormat?: ActionFormat;
  quiet?: boolean;
  json?: boolean;
}

function actionFormat(value: string): ActionFormat {
  if (!(ACTION_FORMATS as readonly string[]).includes(value))
    throw new InvalidArgumentError(`expected one of ${ACTION_FORMATS.join(', ')}`);
  return value as ActionFormat;
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('expected a port number (0-65535; 0: any free port)');
  return n;
}

export function register(program: Command): void {
  const env = program.command('env').description('serve scenarios to other trainers (OpenEnv protocol)');
  env
    .command('serve')
    .description(
      "serve a scenario over OpenEnv's protocol (WebSocket /ws; HTTP /health /metadata /schema /reset /step): each session is an episode whose policy is the client, recorded for replay",
    )
    .requiredOption('--scenario <name>', 'scenario name or folder')
    .option('--option <key=value>', 'a scenario option (repeatable), e.g. --option size=large', keyValue, [])
    .option('--data <path>', 'dataset file, for the dataset scenarios')
    .option('--port <p>', 'port (0: any free port)', port, DEFAULT_ENV_PORT)
    .option('--host <host>', 'interface to listen on (anything but loopback needs --api-key)', '127.0.0.1')
    .option('--max-sessions <n>', 'sessions at once; more get CAPACITY_REACHED', positiveInt, DEFAULT_MAX_SESSIONS)
    .option(
      '--idle-timeout <s>',
      'close sessions silent this long, recording their episode (0: never)',
      nonNegativeNumber,
      DEFAULT_IDLE_TIMEOUT_MS / 1000,
    )
    .option('--record <dir>', 'append every episode to DIR/episodes.jsonl (default runs/env-<scenario>)')
    .option('--no-record', 'keep no records')
    .addOption(
      new Option('--api-key <key>', 'require "Authorization: Bearer KEY" (default: none)').env('AGENT_R1_API_KEY'),
    )
    .option(
      '--max-message-bytes <n>',
      'refuse bodies and messages over this size',
      positiveInt,
      DEFAULT_MAX_MESSAGE_BYTES,
    )
    .option('--max-turns <n>', "turns per episode (default: the scenario's)", budget('maxTurns'))
    .option(
      '--max-tokens-per-turn <n>',
      "tokens one action may take (default: the scenario's)",
      budget('maxTokensPerTurn'),
    )
    .option(
      '--max-total-tokens <n>',
      "action + observation tokens per episode (default: the scenario's)",
      budget('maxTotalTokens'),
    )
    .option('--context <mode>', `${CONTEXT_HELP}; each observation's messages are what the step is shown`, contextMode)
    .option(
      '--action-format <f>',
      "how the client's actions are read: tags (<tool_call> or <answer>; the default), hermes (a <tool_call>, or the turn is the answer: Qwen and most chat models) or llama3-json (Llama 3.x's JSON calls)",
      actionFormat,
    )
    .option('--quiet', 'no session log on stderr')
    .option('--json', 'print {url, ws, scenario, records, runId} as one stdout line once listening')
    .action(async (flags: EnvServeFlags) => {
      if (!isLoopback(flags.host) && !flags.apiKey)
        throw new UsageError(`--host ${flags.host} faces a network: give --api-key (or AGENT_R1_API_KEY) too`);
      const scenario = await scenarioFromFlags(flags);
      const config = Object.fromEntries(
        Object.entries({
          maxTurns: flags.maxTurns,
          maxTokensPerTurn: flags.maxTokensPerTurn,
          maxTotalTokens: flags.maxTotalTokens,
          context: contextSetting(scenario, flags.context),
          actionFormat: flags.actionFormat,
        }).filter(([, v]) => v !== undefined),
      );
      const recordDir = flags.record === false ? undefined : (flags.record ?? `runs/env-${scenario.id}`);
      const server = new EnvServer({
        scenario,
        config,
        maxSessions: flags.maxSessions,
        idleTimeoutMs: flags.idleTimeout * 1000,
        maxMessageBytes: flags.maxMessageBytes,
        ...(recordDir ? { recordDir } : {}),
        ...(flags.apiKey ? { apiKey: flags.apiKey } : {}),
        onLog: flags.quiet ? undefined : (line) => process.stderr.write(line + '\n'),
      });
      const url = await server.listen(flags.port, flags.host);
      const ws = `${url.replace(/^http/, 'ws')}/ws`;
      process.stderr.write(
        `serving scenario ${scenario.id} ${scenario.version} at ${url} (WebSocket ${ws})${flags.apiKey ? ', API key required' : ''}; records: ${server.recordFile ?? 'none'}\n`,
      );
      if (flags.json)
        printJson({ url, ws, scenario: scenario.id, records: server.recordFile ?? null, runId: server.runId });
      await new Promise<void>((done) => {
        const stop = () => {
          process.stderr.write('shutting down: recording the episodes under way\n');
          void server.close().then(done);
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });
  for (const command of env.commands) command.exitOverride().showHelpAfterError();
}
