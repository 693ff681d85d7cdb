import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import OpenAI from 'openai';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';
import { calculatorCheckpoint } from '../openai/fixtures.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

test.serial(
  'agent-r1 serve: the openai client talks to it; the request log goes to stderr; SIGTERM stops it cleanly',
  async (t) => {
    const { dir } = await calculatorCheckpoint();
    const child = spawn(
      process.execPath,
      cliArgs(['serve', '--policy', `ckpt:${dir}`, '--port', '0', '--model-name', 'tiny', '--json']),
      {
        cwd: repoRoot,
        env: { ...process.env, AGENT_R1_API_KEY: 'sk-cli' },
      },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', () => reject(new Error(`serve exited: ${stderr}`)));
      });
      const { url, model, version } = JSON.parse(line);
      t.is(model, 'tiny');
      t.regex(url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      t.regex(version, /^[0-9a-f]{64}$/);
      const client = new OpenAI({ apiKey: 'sk-cli', baseURL: url, maxRetries: 0 });
      t.deepEqual(
        (await client.models.list()).data.map((m) => m.id),
        ['tiny'],
      );
      const res = await client.chat.completions.create({
        model: 'tiny',
        messages: [{ role: 'user', content: 'What is 2 + 2?' }],
        max_tokens: 5,
        temperature: 0,
      });
      t.true(res.usage!.completion_tokens >= 1 && res.usage!.completion_tokens <= 5);
      await t.throwsAsync(new OpenAI({ apiKey: 'nope', baseURL: url, maxRetries: 0 }).models.list(), {
        instanceOf: OpenAI.AuthenticationError,
      });
      child.kill('SIGTERM');
      t.is(await exited, 0);
      t.regex(stderr, /serving "tiny" \(ckpt:.*\) at http:\/\/127\.0\.0\.1:\d+\/v1 \(API key required\)/);
      t.regex(stderr, /POST \/v1\/chat\/completions 200 \d+ ms \(\d+ prompt \+ \d+ completion tokens\)/);
      t.regex(stderr, /GET \/v1\/models 401/);
    } finally {
      child.kill('SIGKILL');
    }
  },
);

test.serial('agent-r1 serve refuses a policy that is not a checkpoint, and bad ports', (t) => {
  const r = cli(['serve', '--policy', 'expert']);
  t.is(r.code, 2);
  t.regex(r.stderr, /unknown policy to serve "expert"; valid: ckpt:DIR, hf:DIR/);
  const p = cli(['serve', '--policy', 'ckpt:x', '--port', '70000']);
  t.is(p.code, 2);
  t.regex(p.stderr, /expected a port number/);
  const missing = cli(['serve', '--policy', 'ckpt:/nonexistent/ckpt', '--port', '0']);
  t.is(missing.code, 1);
  t.regex(missing.stderr, /cannot read checkpoint/);
});

const NEVER_ENDS = '{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}';

/** A tiny Hugging Face folder whose chat template is `template`. */
async function folderWith(template: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agent-r1-serve-template-'));
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 48,
    seed: 5,
  });
  await writeFile(join(dir, 'chat_template.jinja'), template);
  return dir;
}

test.serial('agent-r1 serve refuses, at load and within seconds, a chat template that never ends', async (t) => {
  const dir = await folderWith(NEVER_ENDS);
  try {
    const started = Date.now();
    const r = cli(['serve', '--policy', `hf:${dir}`, '--port', '0'], { timeout: 60_000 });
    t.is(r.code, 1, r.stderr);
    t.true(Date.now() - started < 30_000, `took ${Date.now() - started} ms`);
    t.regex(r.stderr, /chat_template\.jinja ran past its budget of \d+ (operations|milliseconds)/);
    t.notRegex(r.stderr, /serving "/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test.serial(
  'agent-r1 serve: a request its template never finishes is a 400 naming the budget; SIGTERM sent during one ends the server within seconds',
  async (t) => {
    // The template loops without end on one message's content only, so the server loads and serves.
    const dir = await folderWith(
      `{% if messages[-1].content == 'spin' %}${NEVER_ENDS}{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}`,
    );
    const child = spawn(process.execPath, cliArgs(['serve', '--policy', `hf:${dir}`, '--port', '0', '--json']), {
      cwd: repoRoot,
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', () => reject(new Error(`serve exited: ${stderr}`)));
      });
      const { url, model } = JSON.parse(line);
      const ask = (content: string) =>
        fetch(`${url}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 1 }),
        });
      const spun = await ask('spin');
      t.is(spun.status, 400);
      const { error } = (await spun.json()) as { error: { code: string; message: string } };
      t.is(error.code, 'template_budget_exceeded');
      t.regex(error.message, /ran past its budget of \d+ (operations \(MAX_TEMPLATE_OPERATIONS\)|milliseconds)/);
      t.is((await ask('hello')).status, 200, 'the server goes on');
      const pending = ask('spin').catch(() => null);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const signalled = Date.now();
      child.kill('SIGTERM');
      t.is(await exited, 0);
      t.true(Date.now() - signalled < 10_000, `exited ${Date.now() - signalled} ms after SIGTERM`);
      await pending;
      t.regex(stderr, /shutting down/);
    } finally {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  },
);

test.serial(
  'agent-r1 serve --record refuses a records file that is a link out of its folder (exit 1), writing nothing',
  async (t) => {
    const { dir } = await calculatorCheckpoint();
    const root = mkdtempSync(join(tmpdir(), 'agent-r1-serve-record-'));
    try {
      const outside = join(root, 'outside.jsonl');
      writeFileSync(outside, 'not yours\n');
      const records = join(root, 'records');
      mkdirSync(records);
      symlinkSync(outside, join(records, 'episodes.jsonl'));
      const r = cli(['serve', '--policy', `ckpt:${dir}`, '--port', '0', '--record', records]);
      t.is(r.code, 1, r.stderr);
      t.regex(r.stderr, /records\/episodes\.jsonl is a symbolic link, not a regular file/);
      t.is(readFileSync(outside, 'utf8'), 'not yours\n');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
);

test.serial(
  "agent-r1 serve: a 500 tells the client what failed, and only the server's stderr why (its files' paths), even with --quiet",
  async (t) => {
    const { dir } = await calculatorCheckpoint();
    const root = mkdtempSync(join(tmpdir(), 'agent-r1-serve-500-'));
    const records = join(root, 'records');
    const child = spawn(
      process.execPath,
      cliArgs(['serve', '--policy', `ckpt:${dir}`, '--port', '0', '--record', records, '--json', '--quiet']),
      { cwd: repoRoot },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', () => reject(new Error(`serve exited: ${stderr}`)));
      });
      const { url, model } = JSON.parse(line);
      const headers = { 'content-type': 'application/json', 'x-agent-r1-episode': 'e1' };
      const chat = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'What is 2 + 2?' }], max_tokens: 3 }),
      });
      t.is(chat.status, 200);
      // The records file becomes a link out of its folder: the record cannot be written (a 500).
      const file = join(records, 'episodes.jsonl');
      rmSync(file, { force: true });
      writeFileSync(join(root, 'outside.jsonl'), '');
      symlinkSync(join(root, 'outside.jsonl'), file);
      const reward = await fetch(`${url}/episodes/e1/reward`, { method: 'POST', headers, body: '{"reward": 1}' });
      t.is(reward.status, 500);
      const text = await reward.text();
      t.false(text.includes(root), `no path of the server's reaches the client: ${text}`);
      t.is(JSON.parse(text).error.message, "internal error; the server's log says why");
      child.kill('SIGTERM');
      await exited;
      t.regex(
        stderr,
        /POST \/v1\/episodes\/e1\/reward 500: .*records\/episodes\.jsonl is a symbolic link, not a regular file/,
      );
      t.notRegex(stderr, /POST \/v1\/chat\/completions 200/, '--quiet: no request log');
      t.is(readFileSync(join(root, 'outside.jsonl'), 'utf8'), '');
    } finally {
      child.kill('SIGKILL');
      rmSync(root, { recursive: true, force: true });
    }
  },
);
