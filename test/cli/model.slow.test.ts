import test from 'ava';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toFloat32, fromFloat32 } from '../../src/formats/dtype.ts';
import { readSafetensorsHeader, readTensor } from '../../src/formats/safetensors.ts';
import { openHfFolder } from '../../src/hf/folder.ts';
import { cli } from '../helpers/cli.ts';
import { calculatorCheckpoint } from '../openai/fixtures.ts';
import { writeTinyFolder } from '../helpers/hf-folder.ts';

const root = mkdtempSync(join(tmpdir(), 'agent-r1-model-cli-'));
const dir = join(root, 'tiny-qwen3');
const model = `hf:${dir}`;
test.before(async () => {
  await writeTinyFolder(dir, {
    architecture: 'Qwen3ForCausalLM',
    hidden: 32,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 16,
    intermediate: 48,
    seed: 8,
  });
});
test.after.always(() => rmSync(root, { recursive: true, force: true }));

const messages = join(root, 'messages.json');
const tools = join(root, 'tools.json');
writeFileSync(
  messages,
  JSON.stringify([
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Zähle bis 3 😀' },
    {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: 'a', type: 'function', function: { name: 'count', arguments: '{"to": 3}' } }],
    },
    { role: 'tool', tool_call_id: 'a', content: '1 2 3' },
  ]),
);
writeFileSync(
  tools,
  JSON.stringify([
    {
      type: 'function',
      function: {
        name: 'count',
        description: 'Count.',
        parameters: { type: 'object', properties: { to: { type: 'integer' } } },
      },
    },
  ]),
);

test.serial('model info, tokenize, render and generate describe and run an hf:DIR folder', async (t) => {
  const info = cli(['model', 'info', '--model', model, '--json']);
  t.is(info.code, 0, info.stderr);
  t.like(info.lastJson(), {
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 32,
    layers: 1,
    kvHeads: 1,
    headDim: 16,
    vocabSize: 151936,
    dtype: 'F32',
    toolCalls: 'hermes',
    qkNorm: true,
  });
  const folder = await openHfFolder(dir);
  const text = '<|im_start|>user\n  two  spaces, ünïcode 😀 and code: `x => x*2`<|im_end|>';
  const tok = cli(['model', 'tokenize', '--model', model, '--text', text, '--json']);
  t.is(tok.code, 0, tok.stderr);
  t.deepEqual(tok.lastJson(), { ids: folder.tokenizer.encode(text) });
  t.is(tok.lastJson().ids[0], 151644, 'a special token written in the text is the special');
  const render = cli(['model', 'render', '--model', model, '--messages', messages, '--tools', tools]);
  t.is(render.code, 0, render.stderr);
  t.is(
    render.stdout,
    folder.template!.render({
      messages: JSON.parse(readFileSync(messages, 'utf8')),
      tools: JSON.parse(readFileSync(tools, 'utf8')),
      addGenerationPrompt: true,
    }),
  );
  t.true(render.stdout.endsWith('<|im_start|>assistant\n'));
  const bare = cli(['model', 'render', '--model', model, '--messages', messages, '--no-generation-prompt']);
  t.true(bare.stdout.endsWith('</tool_response><|im_end|>\n'));
  const ids = folder.tokenizer.encode(render.stdout);
  const a = cli([
    'model',
    'generate',
    '--model',
    model,
    '--prompt-ids',
    ids.join(','),
    '--max-new-tokens',
    '6',
    '--json',
  ]);
  const b = cli([
    'model',
    'generate',
    '--model',
    model,
    '--messages',
    messages,
    '--tools',
    tools,
    '--max-new-tokens',
    '6',
    '--json',
  ]);
  t.is(a.code, 0, a.stderr);
  t.deepEqual(b.lastJson(), a.lastJson(), 'the conversation renders to those ids');
  const out = a.lastJson();
  t.is(out.ids.length, out.logprobs.length);
  t.true(out.logprobs.every((x: number) => x <= 0));
  t.is(out.text, folder.tokenizer.decode(out.ids));
});

test.serial('model export: an hf export in the source dtype is the same bytes; bf16 rounds; GGUF is written', (t) => {
  const same = join(root, 'same');
  const r = cli(['model', 'export', '--model', model, '--format', 'hf', '--out', same]);
  t.is(r.code, 0, r.stderr);
  t.true(readFileSync(join(same, 'model.safetensors')).equals(readFileSync(join(dir, 'model.safetensors'))));
  t.true(readFileSync(join(same, 'tokenizer.json')).equals(readFileSync(join(dir, 'tokenizer.json'))));
  const again = cli(['model', 'export', '--model', model, '--format', 'hf', '--out', same]);
  t.is(again.code, 2);
  t.regex(again.stderr, /exists; choose another --out, or pass --force/);
  const bf16 = join(root, 'bf16');
  t.is(cli(['model', 'export', '--model', model, '--format', 'hf', '--out', bf16, '--dtype', 'bf16']).code, 0);
  t.is(JSON.parse(readFileSync(join(bf16, 'config.json'), 'utf8')).torch_dtype, 'bfloat16');
  const gguf = join(root, 'tiny.gguf');
  t.is(cli(['model', 'export', '--model', `hf:${bf16}`, '--format', 'gguf', '--out', gguf]).code, 0);
  t.is(readFileSync(gguf).subarray(0, 4).toString('ascii'), 'GGUF');
  return (async () => {
    const name = 'model.layers.0.mlp.up_proj.weight';
    const src = (await readSafetensorsHeader(join(dir, 'model.safetensors'))).tensors.find((e) => e.name === name)!;
    const out = (await readSafetensorsHeader(join(bf16, 'model.safetensors'))).tensors.find((e) => e.name === name)!;
    t.is(out.dtype, 'BF16');
    const rounded = toFloat32(fromFloat32(await readTensor(src), 'BF16'), 'BF16');
    t.true(Buffer.from((await readTensor(out)).buffer).equals(Buffer.from(rounded.buffer)));
  })();
});

const refusals: Array<[string, string[], number, RegExp]> = [
  [
    'a model that is neither hf: nor ckpt:',
    ['model', 'info', '--model', 'qwen3'],
    2,
    /--model must be hf:DIR .* or ckpt:DIR/,
  ],
  [
    'a folder that does not exist',
    ['model', 'info', '--model', 'hf:/nonexistent/model'],
    1,
    /\/nonexistent\/model: no such folder/,
  ],
  [
    'both prompts',
    ['model', 'generate', '--model', model, '--prompt-ids', '1', '--messages', messages, '--max-new-tokens', '2'],
    2,
    /one of --prompt-ids or --messages/,
  ],
  [
    'no prompt',
    ['model', 'generate', '--model', model, '--max-new-tokens', '2'],
    2,
    /one of --prompt-ids or --messages/,
  ],
  [
    'ids that are not ids',
    ['model', 'generate', '--model', model, '--prompt-ids', '1,x', '--max-new-tokens', '2'],
    2,
    /expected token ids/,
  ],
  [
    'an id past the vocabulary',
    ['model', 'generate', '--model', model, '--prompt-ids', '1,151936', '--max-new-tokens', '2'],
    2,
    /151936 is not a token id of the model/,
  ],
  [
    'a messages file that is not there',
    ['model', 'render', '--model', model, '--messages', join(root, 'none.json')],
    1,
    /none\.json: cannot read it \(ENOENT\)/,
  ],
  [
    'a messages file of the wrong shape',
    ['model', 'render', '--model', model, '--messages', tools],
    1,
    /tools\.json: is not a list of OpenAI chat messages: at 0\.role/,
  ],
  [
    'an unknown format',
    ['model', 'export', '--model', model, '--format', 'onnx', '--out', join(root, 'x')],
    2,
    /expected gguf or hf/,
  ],
  [
    'an unknown dtype',
    ['model', 'export', '--model', model, '--format', 'gguf', '--out', join(root, 'x'), '--dtype', 'f8'],
    2,
    /expected f32, f16 or bf16/,
  ],
];

for (const [name, args, code, message] of refusals) {
  test.serial(`model: ${name} is refused in one line (exit ${code})`, (t) => {
    const r = cli(args);
    t.is(r.code, code, r.stderr);
    t.regex(r.stderr, message);
    t.is(
      r.stderr
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('error:')).length,
      1,
    );
    t.notRegex(r.stderr, /\n\s+at /, 'no stack trace');
  });
}

test.serial(
  'model render: a template that never ends is stopped at its budget, exit 1 within seconds, in one line',
  (t) => {
    const spinning = join(root, 'spinning');
    cpSync(dir, spinning, { recursive: true });
    writeFileSync(
      join(spinning, 'chat_template.jinja'),
      '{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}',
    );
    const started = Date.now();
    const r = cli(['model', 'render', '--model', `hf:${spinning}`, '--messages', messages], { timeout: 60_000 });
    t.is(r.code, 1, r.stderr);
    t.true(Date.now() - started < 20_000, `took ${Date.now() - started} ms`);
    t.regex(
      r.stderr,
      /chat_template\.jinja ran past its budget of \d+ (operations \(MAX_TEMPLATE_OPERATIONS\)|milliseconds \(TEMPLATE_DEADLINE_MS\))/,
    );
    t.is(r.stdout, '');
    t.notRegex(r.stderr, /\n\s+at /, 'no stack trace');
  },
);

test.serial('rollout --policy hf:DIR gives byte-identical records on 0 and 2 workers, and they replay', (t) => {
  const runs = [0, 2].map((workers) => {
    const out = join(root, `rollout-${workers}`);
    const r = cli([
      'rollout',
      '--scenario',
      'calculator',
      '--policy',
      model,
      '--episodes',
      '6',
      '--max-tokens-per-turn',
      '8',
      '--workers',
      String(workers),
      '--out',
      out,
      '--json',
    ]);
    t.is(r.code, 0, r.stderr);
    return readFileSync(join(out, 'episodes.jsonl'), 'utf8');
  });
  t.is(runs[0], runs[1]);
  const record = JSON.parse(runs[0]!.split('\n')[0]!);
  t.like(record, { policy: { id: model }, config: { actionFormat: 'hermes' } });
  t.true(record.promptTokens.length > 100, 'the prompt is the template with the tools');
  const replay = cli(['replay', join(root, 'rollout-2', 'episodes.jsonl'), '--quiet', '--json']);
  t.is(replay.code, 0, replay.stderr);
  t.like(replay.lastJson(), { episodes: 6, verified: 6, diverged: 0, corrupt: 0 });
  t.false(existsSync(join(root, 'rollout-0', 'nope')));
});

test.serial(
  'the model commands read a checkpoint of the built-in GPT too (ckpt:DIR), and refuse to export it',
  async (t) => {
    const { dir: ckpt } = await calculatorCheckpoint();
    const spec = `ckpt:${ckpt}`;
    const info = cli(['model', 'info', '--model', spec, '--json']);
    t.is(info.code, 0, info.stderr);
    t.like(info.lastJson(), { architecture: 'agent-r1-gpt', hiddenSize: 32, layers: 1, toolCalls: 'tags' });
    const ids = cli(['model', 'tokenize', '--model', spec, '--text', 'What is 2 + 2?', '--json']).lastJson().ids;
    t.true(ids.length > 0);
    const render = cli(['model', 'render', '--model', spec, '--messages', messages]);
    t.is(render.code, 0, render.stderr);
    t.true(render.stdout.startsWith('<|system|>Be brief.<|end|><|user|>'));
    t.true(render.stdout.endsWith('<|assistant|>'));
    const gen = cli([
      'model',
      'generate',
      '--model',
      spec,
      '--prompt-ids',
      ids.join(','),
      '--max-new-tokens',
      '4',
      '--json',
    ]);
    t.is(gen.code, 0, gen.stderr);
    t.is(gen.lastJson().ids.length, gen.lastJson().logprobs.length);
    const out = cli(['model', 'export', '--model', spec, '--format', 'gguf', '--out', join(root, 'gpt.gguf')]);
    t.is(out.code, 2);
    t.regex(out.stderr, /holds the built-in GPT, which no other engine runs/);
  },
);

test.serial('model info refuses a FIFO in place of model.safetensors (exit 1) instead of waiting on it', (t) => {
  const fifoDir = join(root, 'fifo-weights');
  cpSync(dir, fifoDir, { recursive: true });
  rmSync(join(fifoDir, 'model.safetensors'));
  execFileSync('mkfifo', [join(fifoDir, 'model.safetensors')]);
  const r = cli(['model', 'info', '--model', `hf:${fifoDir}`], { timeout: 60_000 });
  t.is(r.code, 1, `it ended (a timeout leaves no exit code): ${r.stderr}`);
  t.regex(r.stderr, /fifo-weights\/model\.safetensors: is not a file \(it is a FIFO\)/);
});

test.serial(
  'model generate refuses a prompt longer than the context (exit 1), naming both lengths, as serve does',
  async (t) => {
    const tooLong = (r: ReturnType<typeof cli>, tokens: RegExp | number, context: number) => {
      t.is(r.code, 1, r.stderr);
      t.regex(
        r.stderr,
        new RegExp(
          `the prompt is ${typeof tokens === 'number' ? tokens : tokens.source} tokens; this model's context is ${context} tokens`,
        ),
      );
      t.is(r.stdout, '', 'no empty result is printed');
    };
    const generate = (model: string, ...args: string[]) =>
      cli(['model', 'generate', '--model', model, '--max-new-tokens', '2', '--json', ...args]);
    tooLong(generate(model, '--prompt-ids', Array(5000).fill(1).join(',')), 5000, 4096);
    const many = join(root, 'many-messages.json');
    writeFileSync(many, JSON.stringify(Array.from({ length: 2000 }, (_, i) => ({ role: 'user', content: `n${i}` }))));
    tooLong(generate(model, '--messages', many), /\d{4,}/, 4096);
    const manyTools = join(root, 'many-tools.json');
    const oneTool = JSON.parse(readFileSync(tools, 'utf8'))[0];
    writeFileSync(manyTools, JSON.stringify(Array.from({ length: 300 }, () => oneTool)));
    tooLong(generate(model, '--messages', messages, '--tools', manyTools), /\d{4,}/, 4096);
    // At the context exactly, a token is still generated (the last one is never fed back).
    const fits = generate(model, '--prompt-ids', Array(4096).fill(1).join(','), '--max-new-tokens', '1');
    t.is(fits.code, 0, fits.stderr);
    t.is(fits.lastJson().ids.length, 1);
    const { dir: ckpt } = await calculatorCheckpoint();
    const context = cli(['model', 'info', '--model', `ckpt:${ckpt}`, '--json']).lastJson().contextLength;
    tooLong(
      generate(
        `ckpt:${ckpt}`,
        '--prompt-ids',
        Array(context + 1)
          .fill(5)
          .join(','),
      ),
      context + 1,
      context,
    );
  },
);
