import { Option, type Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { basename, resolve } from 'node:path';
import { loadModelPolicy } from '../../app/resolve-policy.ts';
import { UnknownNameError, UsageError } from '../../core/errors.ts';
import { ChatServer, DEFAULT_MAX_BODY_BYTES } from '../../openai/server.ts';
import type { ServedPolicy } from '../../openai/chat-format.ts';
import type { ServablePolicy } from '../../openai/serving-policy.ts';
import { LOAD_DTYPE_HELP, loadDtype, nonNegativeInt, positiveInt, printJson } from '../common.ts';
import type { LoadDtype } from '../../hf/folder.ts';
import { terminalLine } from '../terminal-text.ts';
import { randomBytes } from 'node:crypto';
import { AGENT_SCENARIO_ID } from '../../record/agent.ts';
import { Gateway, GATEWAY_DEFAULTS, policyAnswerer } from '../../gateway/gateway.ts';
import { EPISODE_HEADER } from '../../openai/episode-gateway.ts';
import { RecordFile } from '../../gateway/record-file.ts';
import { TeacherAnswerer, teacherBaseURL, teacherModel } from '../../gateway/teacher-answerer.ts';
import type { TurnAnswerer } from '../../openai/completions.ts';

interface ServeFlags {
  policy: string;
  port: number;
  host: string;
  apiKey?: string;
  modelName?: string;
  dtype?: LoadDtype;
  maxBatch: number;
  maxWaitMs: number;
  maxBodyBytes: number;
  quiet?: boolean;
  json?: boolean;
  record?: string;
  maxTurns: number;
  episodeTimeout: number;
  teacherModel?: string;
  teacherApiKey?: string;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

function apiKey(value: string): string {
  // An empty key (--api-key "" or AGENT_R1_API_KEY=) must not silently mean "no authentication".
  if (value === '') throw new InvalidArgumentError('the key is empty; give a key, or leave the option out for none');
  return value;
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('expected a port number (0-65535; 0: any free port)');
  return n;
}

/**
 * A policy to serve: `ckpt:DIR` (a checkpoint of this project: a Hugging Face model's or the GPT's) or
 * `hf:DIR`. `others`: the other specs the caller takes, named in the refusal of an unknown one;
 * `temperature` replaces the model's saved sampling temperature (0: greedy).
 */
export async function loadServedPolicy(
  spec: string,
  options: { others?: readonly string[]; temperature?: number; dtype?: LoadDtype } = {},
): Promise<ServedPolicy> {
  const policy = await loadModelPolicy(spec, { temperature: options.temperature, dtype: options.dtype });
  if (!policy) throw new UnknownNameError('policy to serve', spec, ['ckpt:DIR', 'hf:DIR', ...(options.others ?? [])]);
  // Both model policies (HfPolicy, TfjsPolicy) are batch policies with a tokenizer and a context.
  return policy as unknown as ServablePolicy;
}

export function register(program: Command): void {
  program
    .command('serve')
    .description(
      'serve a trained policy behind an OpenAI-compatible API (POST /v1/chat/completions, GET /v1/models); or, with --policy openai:URL --record DIR, forward to a teacher endpoint and record its episodes (text-only: SFT data)',
    )
    .requiredOption(
      '--policy <spec>',
      'the policy to serve: ckpt:DIR (a checkpoint), hf:DIR (a Hugging Face folder), or openai:URL (a teacher: any OpenAI-compatible endpoint, e.g. openai:http://127.0.0.1:8001/v1; with --record only: each request is forwarded to it and its episodes are recorded as text-only records, SFT data and never RL data)',
    )
    .option('--port <p>', 'port (0: any free port)', port, 8000)
    .option(
      '--host <host>',
      'interface to listen on (default 127.0.0.1, which answers only requests addressed to localhost)',
      '127.0.0.1',
    )
    .addOption(
      new Option('--api-key <key>', 'require "Authorization: Bearer KEY" (default: none)')
        .env('AGENT_R1_API_KEY')
        .argParser(apiKey),
    )
    .option('--model-name <name>', "the model id clients ask for (default: the folder name, or the teacher's model)")
    .option(
      '--teacher-model <name>',
      'with openai:URL: the model to ask the teacher for (default: the first of GET URL/models)',
    )
    .addOption(
      new Option('--teacher-api-key <key>', 'with openai:URL: the key sent to the teacher (default: none)')
        .env('AGENT_R1_TEACHER_API_KEY')
        .argParser(apiKey),
    )
    .option('--max-batch <b>', 'most requests generated in one batch', positiveInt, 32)
    .option('--max-wait-ms <ms>', 'how long a request waits for others to batch with', nonNegativeInt, 10)
    .option('--max-body-bytes <n>', 'refuse request bodies over this size (413)', positiveInt, DEFAULT_MAX_BODY_BYTES)
    .option(
      '--record <dir>',
      'record episodes to DIR/episodes.jsonl: requests with the header x-agent-r1-episode: ID are its turns; POST /v1/episodes/ID/reward closes it',
    )
    .option('--max-turns <n>', 'with --record: requests per episode at most', positiveInt, GATEWAY_DEFAULTS.maxTurns)
    .option(
      '--episode-timeout <s>',
      'with --record: an episode with no request and no reward for this long is written as unfinished',
      positiveInt,
      GATEWAY_DEFAULTS.idleTimeoutMs / 1000,
    )
    .option('--dtype <d>', LOAD_DTYPE_HELP, loadDtype)
    .option('--quiet', 'no request log on stderr (why a request failed still is)')
    .option('--json', 'print {url, model, version, records?, teacher?} as one stdout line once listening')
    .action(async (flags: ServeFlags) => {
      const teacher = flags.policy.startsWith('openai:') ? await openTeacher(flags) : undefined;
      if (!teacher && flags.teacherModel !== undefined)
        throw new UsageError('--teacher-model is for --policy openai:URL (a teacher)');
      if (teacher && flags.dtype !== undefined)
        throw new UsageError("--dtype is for a model served here (ckpt:DIR, hf:DIR), not a teacher's endpoint");
      const policy = teacher
        ? undefined
        : await loadServedPolicy(flags.policy, { others: ['openai:URL (with --record)'], dtype: flags.dtype });
      const dir = flags.policy.replace(/^(ckpt|hf):/, '');
      const modelName = flags.modelName ?? (teacher ? teacher.model : basename(resolve(dir)));
      const batching = { maxBatch: flags.maxBatch, maxWaitMs: flags.maxWaitMs };
      const records = flags.record === undefined ? undefined : await RecordFile.open(flags.record);
      const answerer: TurnAnswerer | undefined = teacher
        ? new TeacherAnswerer({ ...teacher, modelName })
        : records && policyAnswerer(policy!, modelName, batching);
      const served = teacher ? answerer!.policy : policy!;
      const gateway = records
        ? new Gateway({
            answerer,
            modelName,
            runId: `serve-${randomBytes(6).toString('hex')}`,
            agent: { id: AGENT_SCENARIO_ID, version: 'serve', options: {} },
            openOnRequest: true,
            firstIndex: records.existing,
            maxTurns: flags.maxTurns,
            idleTimeoutMs: flags.episodeTimeout * 1000,
            onRecord: (record) => records.append(record),
          })
        : undefined;
      const server = new ChatServer({
        ...(gateway ? { gateway } : { policy: policy!, modelName, ...batching }),
        ...(flags.apiKey !== undefined ? { apiKey: flags.apiKey } : {}),
        maxBodyBytes: flags.maxBodyBytes,
        // A failure's cause goes to this log only (it may name the server's files), even when --quiet.
        onRequest: (e) => {
          if (!flags.quiet)
            process.stderr.write(
              `${e.method} ${e.path} ${e.status} ${e.ms.toFixed(0)} ms${e.completionTokens === undefined ? '' : ` (${e.promptTokens} prompt + ${e.completionTokens} completion tokens)`}\n`,
            );
          if (e.error !== undefined)
            process.stderr.write(`${terminalLine(`${e.method} ${e.path} ${e.status}: ${e.error}`)}\n`);
        },
      });
      const url = await server.listen(flags.port, flags.host);
      const what = teacher
        ? `the teacher ${served.id}, recorded as text-only records`
        : `${served.id}, version ${served.version.slice(0, 12)}`;
      process.stderr.write(`serving "${modelName}" (${what}) at ${url}${flags.apiKey ? ' (API key required)' : ''}\n`);
      if (!LOOPBACK.has(flags.host) && flags.apiKey === undefined)
        process.stderr.write(
          `warning: listening on ${flags.host} without --api-key: anyone who can reach it can use it\n`,
        );
      if (records)
        process.stderr.write(
          `recording episodes to ${records.path} (header ${EPISODE_HEADER}: ID; POST ${url}/episodes/ID/reward closes one)\n`,
        );
      if (flags.json)
        printJson({
          url,
          model: modelName,
          version: served.version,
          ...(teacher ? { teacher: served.id } : {}),
          ...(records ? { records: records.path } : {}),
        });
      await new Promise<void>((done) => {
        const stop = () => {
          process.stderr.write('shutting down\n');
          // Episodes still open are written as unfinished: nothing recorded is lost.
          void server
            .close()
            .then(() => gateway?.close())
            .then(done);
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
    });
}

/**
 * `--policy openai:URL`: the teacher's URL, model (named, or the first it lists) and key. Only with
 * --record: recording its episodes is what it is for (without, clients can ask the teacher itself).
 */
async function openTeacher(flags: ServeFlags): Promise<{ baseURL: string; model: string; apiKey?: string }> {
  const baseURL = teacherBaseURL(flags.policy.slice('openai:'.length));
  if (flags.record === undefined)
    throw new UsageError(
      `--policy openai:URL forwards to a teacher to record its episodes: give --record DIR (to only use the teacher, point clients at ${baseURL})`,
    );
  const key = flags.teacherApiKey === undefined ? {} : { apiKey: flags.teacherApiKey };
  // Asked once at startup, with one retry: a teacher that is not up is said at once.
  const model = flags.teacherModel ?? (await teacherModel(baseURL, { ...key, maxRetries: 1 }));
  return { baseURL, model, ...key };
}
