import test from 'ava';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculator } from '../../scenarios/calculator/index.ts';
import { contentHash, saveCheckpoint } from '../../src/policy/tfjs/checkpoint.ts';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { GPTModel } from '../../src/architectures/gpt/model.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { sealRecord, serializeRecord } from '../../src/record/record.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { cli } from '../helpers/cli.ts';

/**
 * Every command against every class of bad input it can meet — a missing file, a directory for a
 * file, an empty or malformed or future file, an --out that cannot be written (a path through a
 * file, /proc, a full disk), a port in use, an absurd checkpoint — ends with one `error:` line, the
 * documented exit code (1 failure, 2 usage) and no stack trace, without hanging and before any long
 * work. One spawn per case: the cases are the classes the CLI's one failure mechanism must cover.
 */
const dir = mkdtempSync(join(tmpdir(), 'agent-r1-bad-input-'));
const at = (...parts: string[]) => join(dir, ...parts);
let busyPort = 0;
let busy: Server;

test.before(async () => {
  const scenario = calculator as unknown as Scenario;
  const policy = await scenario.policies.expert!({ scenario, seed: 0 });
  const { records } = await rollout({ scenario, policy, split: 'train', episodes: 2, seed: 0 });
  mkdirSync(at('run'));
  writeFileSync(at('run', 'episodes.jsonl'), records.map((r) => serializeRecord(r) + '\n').join(''));
  writeFileSync(at('run', 'summary.json'), '{}\n');
  writeFileSync(at('empty.jsonl'), '');
  writeFileSync(at('a-file'), 'not a directory\n');
  // Text that would drive the terminal, and a record from a future schema.
  const [first] = records;
  const turns = first!.turns.map((turn, i) => (i === 0 ? { ...turn, text: `\x1b[2J\x1b[31m${turn.text}` } : turn));
  const { checksum: _, ...rest } = { ...first!, turns };
  const future = { ...JSON.parse(serializeRecord(records[1]!)), schema: 99 };
  writeFileSync(at('odd.jsonl'), `${serializeRecord(sealRecord(rest))}\n${JSON.stringify(future)}\n`);
  // A sealed line no run could have written (a context of zero turns), before good ones.
  const resealed = (r: (typeof records)[number], change: (copy: Record<string, unknown>) => void) => {
    const { checksum: _c, ...copy } = structuredClone(r);
    change(copy as unknown as Record<string, unknown>);
    return serializeRecord(sealRecord(copy));
  };
  const lines = [
    resealed(records[0]!, (r) => ((r.config as { context: string }).context = 'window:0')),
    serializeRecord(records[1]!),
    serializeRecord(records[0]!),
  ];
  writeFileSync(at('crafted.jsonl'), `${lines.join('\n')}\n`);
  // A record file on a full disk: /dev/full answers every write with ENOSPC.
  mkdirSync(at('full'));
  symlinkSync('/dev/full', at('full', 'episodes.jsonl'));
  // A tiny real checkpoint, and one with a valid hash asking for a 2^23-token context.
  await initBackend('wasm');
  const tokenizer = trainTokenizer(['<answer>42</answer> calculate'], { vocabSize: 280 });
  const model = new GPTModel({
    vocabSize: tokenizer.vocabSize,
    dModel: 8,
    nLayers: 1,
    nHeads: 2,
    contextLength: 64,
    dMlp: 16,
  });
  await saveCheckpoint(at('ckpt'), model, tokenizer);
  await saveCheckpoint(at('absurd'), model, tokenizer);
  model.dispose();
  const json = JSON.parse(readFileSync(at('absurd', 'model.json'), 'utf8'));
  json.modelConfig.contextLength = 2 ** 23;
  json.hash = contentHash(json.modelConfig, json.tokenizer, readFileSync(at('absurd', 'weights.bin')));
  writeFileSync(at('absurd', 'model.json'), JSON.stringify(json));
  busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  busyPort = (busy.address() as { port: number }).port;
});

test.after.always(() => {
  busy?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Case {
  what: string;
  args: () => string[];
  code: number;
  /** The one `error:` line; null: the command reports on stdout instead (and prints no error line). */
  error: RegExp | null;
  stdout?: RegExp;
  /** Output that must not appear (work done before the failure). */
  not?: RegExp;
}

const calc = ['--scenario', 'calculator'];
const cases: Case[] = [
  {
    what: 'replay of a missing file',
    args: () => ['replay', at('missing.jsonl')],
    code: 1,
    error: /^error: cannot open \S*missing\.jsonl: no such file or directory \(ENOENT\)$/,
  },
  {
    what: 'replay of a directory',
    args: () => ['replay', at('run')],
    code: 1,
    error: /^error: cannot read \S*run: is a directory \(EISDIR\)$/,
  },
  {
    what: 'replay of an empty file',
    args: () => ['replay', at('empty.jsonl')],
    code: 1,
    error: /^error: \S*empty\.jsonl holds no episode records$/,
  },
  {
    what: 'replay of an episode that is not there',
    args: () => ['replay', at('run', 'episodes.jsonl'), '--episode', 'nope'],
    code: 1,
    error: /^error: no episode "nope" in \S+ \(it holds 2 other episodes\)$/,
  },
  {
    what: 'replay of escape sequences and a future schema',
    args: () => ['replay', at('odd.jsonl')],
    code: 1,
    error: null,
    stdout:
      /action: \\x1b\[2J\\x1b\[31m[\s\S]*record schema version 99; this agent-r1 reads version 1 \(written by a newer/,
    not: new RegExp(String.fromCharCode(27)), // a raw ESC: the terminal would obey it
  },
  {
    what: 'replay of a crafted line: its own verdict, the good lines after it still verified',
    args: () => ['replay', at('crafted.jsonl'), '--quiet'],
    code: 1,
    error: null,
    stdout:
      /^CORRUPT line 1: episode \S+ cannot be replayed: unknown context "window:0"[^\n]*\n\n2 episodes: 2 verified, 0 diverged, 1 corrupt lines\n$/,
  },
  {
    what: 'report onto a full disk',
    args: () => ['report', at('run'), '--out', '/dev/full', '--no-replay'],
    code: 1,
    error: /^error: cannot write to \/dev\/full: no space left on device \(ENOSPC\)$/,
  },
  {
    what: 'export under a file',
    args: () => ['export', at('run'), '--format', 'messages', '--out', at('a-file', 'x.jsonl')],
    code: 1,
    error: /^error: cannot create the directory \S*a-file: not a directory \(ENOTDIR\)$/,
  },
  {
    what: 'view on a port in use',
    args: () => ['view', at('run'), '--port', String(busyPort)],
    code: 1,
    error: /^error: the viewer cannot listen on 127\.0\.0\.1:\d+: port \d+ is in use/,
  },
  {
    what: 'serve on a port in use',
    args: () => ['serve', '--policy', `ckpt:${at('ckpt')}`, '--port', String(busyPort), '--quiet'],
    code: 1,
    error: /^error: cannot listen on 127\.0\.0\.1:\d+: the port is in use .*\(EADDRINUSE\)$/,
  },
  {
    what: 'serve with an empty API key',
    args: () => ['serve', '--policy', `ckpt:${at('ckpt')}`, '--api-key', ''],
    code: 2,
    error: /^error: option '--api-key <key>' argument '' is invalid\. the key is empty/,
  },
  {
    what: 'serve of a checkpoint asking for a 2^23-token context',
    args: () => ['serve', '--policy', `ckpt:${at('absurd')}`, '--port', '0'],
    code: 1,
    error: /^error: checkpoint \S+: bad model config: contextLength: .*131072/,
  },
  {
    what: 'rollout into an existing run',
    args: () => ['rollout', ...calc, '--episodes', '1', '--out', at('run')],
    code: 2,
    error: /^error: \S*run already holds a run \(episodes\.jsonl\); choose another --out, or pass --force/,
  },
  {
    what: 'rollout into /proc (once a hang)',
    args: () => ['rollout', ...calc, '--episodes', '1', '--out', '/proc/agent-r1-run'],
    code: 1,
    error: /^error: cannot write to \/proc\/agent-r1-run: no such file or directory \(ENOENT\)$/,
  },
  {
    what: 'rollout onto a full disk',
    args: () => ['rollout', ...calc, '--episodes', '2', '--workers', '0', '--out', at('full'), '--force'],
    code: 1,
    error: /^error: cannot write to \S*full\/episodes\.jsonl: no space left on device \(ENOSPC\)$/,
  },
  {
    what: 'rollout with an unknown context',
    args: () => ['rollout', ...calc, '--context', 'window:0'],
    code: 2,
    error:
      /^error: option '--context <mode>' argument 'window:0' is invalid\. unknown context "window:0"; valid: concat, window:K, card/,
  },
  {
    what: 'train with the old meaning of --context (a token count)',
    args: () => ['train', ...calc, '--algo', 'grpo', '--out', at('never'), '--context', '512'],
    code: 2,
    error:
      /^error: option '--context <mode>' argument '512' is invalid\. expected concat, window:K or card \(the model's context length in tokens is --context-length\)$/,
  },
  {
    what: 'rollout asking for the card of a scenario that has none',
    args: () => ['rollout', ...calc, '--context', 'card', '--episodes', '1', '--out', at('no-card')],
    code: 2,
    error:
      /^error: scenario calculator has no state card \(ToolEnv\.card\), so the "card" context cannot be used; use concat or window:K$/,
  },
  {
    what: 'rollout with 1000 workers',
    args: () => ['rollout', ...calc, '--workers', '1000'],
    code: 2,
    error: /^error: option '--workers <w>' argument '1000' is invalid\. expected at most 256/,
  },
  {
    what: 'sft with --out under a file, before collecting or training',
    args: () => [
      'sft',
      ...calc,
      '--out',
      at('a-file', 'ckpt'),
      '--episodes',
      '2',
      '--steps',
      '1',
      '--eval-episodes',
      '0',
    ],
    code: 1,
    error: /^error: cannot write to \S*a-file\/ckpt: not a directory \(ENOTDIR\)$/,
    not: /^(train|collect):|sft .*\d+\/\d+/m,
  },
  {
    what: 'train with --out in /proc, before the warm start',
    args: () => ['train', ...calc, '--algo', 'grpo', '--out', '/proc/agent-r1-train'],
    code: 1,
    error: /^error: cannot write to \/proc\/agent-r1-train: no such file or directory \(ENOENT\)$/,
    not: /warm start/,
  },
  {
    what: 'train with a --demo-policy the scenario does not have, naming the flag',
    args: () => [
      'train',
      '--scenario',
      'files',
      '--algo',
      'grpo',
      '--demo-policy',
      'noisy-expert',
      '--out',
      at('files-train'),
    ],
    code: 2,
    error:
      /^error: --demo-policy: scenario files has no policy "noisy-expert" for the warm start's demonstrations; valid: expert, random, .*--init ckpt:DIR\|hf:DIR/,
  },
];

for (const c of cases) {
  test.serial(`${c.what}: exit ${c.code}, one line, no stack trace`, (t) => {
    const r = cli(c.args(), { timeout: 60_000 });
    t.is(r.code, c.code, r.stderr);
    const output = r.stdout + r.stderr;
    t.notRegex(output, /^\s+at .+\(?[^)]*:\d+:\d+\)?$/m, 'a stack frame');
    t.notRegex(output, /node:internal|triggerUncaughtException/);
    const errors = r.stderr.split('\n').filter((line) => line.startsWith('error:'));
    if (c.error === null) t.deepEqual(errors, []);
    else {
      t.is(errors.length, 1, r.stderr);
      t.regex(errors[0]!, c.error);
    }
    if (c.stdout) t.regex(r.stdout, c.stdout);
    if (c.not) t.notRegex(output, c.not);
  });
}

test.serial('rollout caps --workers at the episodes and says so', (t) => {
  const r = cli(['rollout', ...calc, '--episodes', '2', '--workers', '64', '--out', at('capped'), '--json']);
  t.is(r.code, 0, r.stderr);
  t.regex(r.stderr, /^workers: 64 workers asked, [12] used \((2 episodes|1 cores)\)$/m);
  t.is(r.lastJson().episodes, 2);
});
