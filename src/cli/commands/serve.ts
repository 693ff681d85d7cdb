import { Option, type Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { basename, resolve } from 'node:path';
import { UnknownNameError } from '../../core/errors.ts';
import { ChatServer, DEFAULT_MAX_BODY_BYTES } from '../../openai/server.ts';
import type { ServedPolicy } from '../../openai/chat-format.ts';
import type { ServablePolicy } from '../../openai/serving-policy.ts';
import { nonNegativeInt, positiveInt, printJson } from '../common.ts';
import { randomBytes } from 'node:crypto';
import { AGENT_SCENARIO_ID } from '../../record/agent.ts';
import { Gateway, GATEWAY_DEFAULTS, policyAnswerer } from '../../gateway/gateway.ts';
import { EPISODE_HEADER } from '../../openai/episode-gateway.ts';
import { RecordFile } from '../../gateway/record-file.ts';

interface ServeFlags {
  policy: string;
  port: number;
  host: string;
  apiKey?: string;
  modelName?: string;
  maxBatch: number;
  maxWaitMs: number;
  maxBodyBytes: number;
  quiet?: boolean;
  json?: boolean;
  record?: string;
  maxTurns: number;
  episodeTimeout: number;
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
 * A policy to serve: `ckpt:DIR` (a checkpoint) or `hf:DIR` (a Hugging Face folder); `temperature`
 * replaces its saved sampling temperature (0: greedy).
 */
export async function loadServedPolicy(spec: string, options: { temperature?: number } = {}): Promise<ServedPolicy> {
  const kind = ['ckpt:', 'hf:'].find((p) => spec.startsWith(p));
  if (!kind) throw new UnknownNameError('policy to serve', spec, ['ckpt:DIR', 'hf:DIR']);
  const dir = spec.slice(kind.length);
  const sampling = { temperature: options.temperature };
  if (kind === 'hf:') return (await import('../../policy/hf/hf-policy.ts')).loadHfPolicy(dir, { sampling });
  // A trained Hugging Face model's checkpoint is its folder plus checkpoint.json (as resolvePolicy reads it).
  const { readHfCheckpoint, savedSampling } = await import('../../hf/checkpoint.ts');
  const hf = await readHfCheckpoint(dir);
  if (hf) {
    const { loadHfPolicy } = await import('../../policy/hf/hf-policy.ts');
    return loadHfPolicy(dir, { id: spec, saved: savedSampling(hf.meta), sampling });
  }
  const { loadCheckpointPolicy } = await import('../../policy/tfjs/tfjs-policy.ts');
  return (await loadCheckpointPolicy(dir, { sampling })) as unknown as ServablePolicy;
}

export function register(program: Command): void {
  program
    .command('serve')
    .description('serve a trained policy behind an OpenAI-compatible API (POST /v1/chat/completions, GET /v1/models)')
    .requiredOption('--policy <spec>', 'the policy to serve: ckpt:DIR (a checkpoint) or hf:DIR (a Hugging Face folder)')
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
    .option('--model-name <name>', 'the model id clients ask for (default: the folder name)')
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
    .option('--quiet', 'no request log on stderr')
    .option('--json', 'print {url, model, version} as one stdout line once listening')
    .action(async (flags: ServeFlags) => {
      const policy = await loadServedPolicy(flags.policy);
      const dir = flags.policy.replace(/^(ckpt|hf):/, '');
      const modelName = flags.modelName ?? basename(resolve(dir));
      const batching = { maxBatch: flags.maxBatch, maxWaitMs: flags.maxWaitMs };
      const records = flags.record === undefined ? undefined : await RecordFile.open(flags.record);
      const gateway = records
        ? new Gateway({
            answerer: policyAnswerer(policy, modelName, batching),
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
        ...(gateway ? { gateway } : { policy, modelName, ...batching }),
        ...(flags.apiKey !== undefined ? { apiKey: flags.apiKey } : {}),
        maxBodyBytes: flags.maxBodyBytes,
        onRequest: flags.quiet
          ? undefined
          : (e) =>
              process.stderr.write(
                `${e.method} ${e.path} ${e.status} ${e.ms.toFixed(0)} ms${e.completionTokens === undefined ? '' : ` (${e.promptTokens} prompt + ${e.completionTokens} completion tokens)`}\n`,
              ),
      });
      const url = await server.listen(flags.port, flags.host);
      process.stderr.write(
        `serving "${modelName}" (${policy.id}, version ${policy.version.slice(0, 12)}) at ${url}${flags.apiKey ? ' (API key required)' : ''}\n`,
      );
      if (!LOOPBACK.has(flags.host) && flags.apiKey === undefined)
        process.stderr.write(
          `warning: listening on ${flags.host} without --api-key: anyone who can reach it can use it\n`,
        );
      if (records)
        process.stderr.write(
          `recording episodes to ${records.path} (header ${EPISODE_HEADER}: ID; POST ${url}/episodes/ID/reward closes one)\n`,
        );
      if (flags.json)
        printJson({ url, model: modelName, version: policy.version, ...(records ? { records: records.path } : {}) });
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
