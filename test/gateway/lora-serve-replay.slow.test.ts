import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import { initBackend } from '../../src/policy/tfjs/backend.ts';
import { HfTrainable } from '../../src/rl/hf-trainable.ts';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';
import { TRAINABLE_QWEN3, writeTinyFolder } from '../helpers/hf-folder.ts';

// ckpt:DIR is read one way by every command: a LoRA checkpoint of a Hugging Face model serves,
// records, and checks the prompt ids of its records in replay, as `model info` reads it.

const root = mkdtempSync(join(tmpdir(), 'agent-r1-lora-serve-'));
const base = join(root, 'base');
const lora = join(root, 'lora');
test.before(async () => {
  await writeTinyFolder(base, { ...TRAINABLE_QWEN3, seed: 9 });
  await initBackend('wasm');
  await (await HfTrainable.load(base, { lora: { rank: 2, alpha: 8 }, seed: 2 })).save(lora);
});
test.after.always(() => rmSync(root, { recursive: true, force: true }));

test.serial('serve --record and replay --policy read a LoRA checkpoint (ckpt:DIR) as model info does', async (t) => {
  const info = cli(['model', 'info', '--model', `ckpt:${lora}`, '--json']);
  t.is(info.code, 0, info.stderr);
  const served = join(root, 'served');
  const child = spawn(
    process.execPath,
    cliArgs(['serve', '--policy', `ckpt:${lora}`, '--port', '0', '--record', served, '--json', '--quiet']),
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
    const { url, model, records, version } = JSON.parse(line);
    t.is(version, info.lastJson().version, "the served model is the checkpoint's (adapters merged)");
    const headers = { 'content-type': 'application/json', 'x-agent-r1-episode': 'e1' };
    const chat = await fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'What is 2 + 2?' }], max_tokens: 3 }),
    });
    t.is(chat.status, 200, await chat.clone().text());
    const reward = await fetch(`${url}/episodes/e1/reward`, { method: 'POST', headers, body: '{"reward": 1}' });
    t.is(reward.status, 200);
    child.kill('SIGTERM');
    t.is(await exited, 0, stderr);
    t.is(readFileSync(records, 'utf8').trim().split('\n').length, 1);
    const replayed = cli(['replay', records, '--policy', `ckpt:${lora}`]);
    t.is(replayed.code, 0, replayed.stdout + replayed.stderr);
    t.regex(replayed.stdout, /verified e1/);
    t.notRegex(replayed.stdout, /prompt ids unchecked/, "each turn's prompt ids are checked against the template");
    t.notRegex(replayed.stderr, /cannot read checkpoint/);
  } finally {
    child.kill('SIGKILL');
  }
});
