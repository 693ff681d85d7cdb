import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import test from 'ava';
import OpenAI, { type APIError } from 'openai';
import type { EpisodeRecord, Task } from '../../src/core/types.ts';
import { openAITools } from '../../src/episode/drive-episode.ts';
import { TeacherError, TeacherUrlError } from '../../src/gateway/errors.ts';
import { Gateway } from '../../src/gateway/gateway.ts';
import { RecordFile } from '../../src/gateway/record-file.ts';
import { checkAgentRecord } from '../../src/gateway/replay-agent.ts';
import { TeacherAnswerer, teacherBaseURL, teacherModel } from '../../src/gateway/teacher-answerer.ts';
import { EPISODE_HEADER } from '../../src/openai/episode-gateway.ts';
import { assistantToAction } from '../../src/openai/messages.ts';
import type { AssistantMessage } from '../../src/openai/wire.ts';
import { ChatServer } from '../../src/openai/server.ts';
import type { ServablePolicy } from '../../src/openai/serving-policy.ts';
import { chatEncoding } from '../../src/policy/tfjs/chat-template.ts';
import { loadCheckpointPolicy } from '../../src/policy/tfjs/index.ts';
import { recordTexts, sequencesFromRecords } from '../../src/policy/tfjs/sft.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import {
  buildStepTrajectories,
  buildTrajectories,
  buildTrajectory,
  recordTokens,
  TextOnlyRecordError,
} from '../../src/policy/trajectory.ts';
import { parseRecordLine, serializeRecord } from '../../src/record/record.ts';
import { cli, cliArgs, repoRoot } from '../helpers/cli.ts';
import { calc, calculatorCheckpoint } from '../openai/fixtures.ts';

/** The teacher is the calculator GPT served by a real ChatServer; the gateway's clients ask for STUDENT. */
const TEACHER = 'calc-tiny';
const STUDENT = 'student';
const task = (calc.tasks({ split: 'train', seed: 0, count: 1 }) as Task[])[0]!;
const tools = openAITools(calc) as OpenAI.ChatCompletionTool[];
const prompt = calc.env.prompt(task, openAITools(calc)) as OpenAI.ChatCompletionMessageParam[];
const tmp = mkdtempSync(join(tmpdir(), 'agent-r1-teacher-'));
let policy: ServablePolicy;
let teacher: ChatServer;

test.before(async () => {
  const { dir } = await calculatorCheckpoint();
  policy = (await loadCheckpointPolicy(dir)) as unknown as ServablePolicy;
  teacher = new ChatServer({ policy, modelName: TEACHER });
  await teacher.listen(0, '127.0.0.1');
});

test.after.always(async () => {
  await teacher?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** `serve --policy openai:URL --record DIR` in process: a gateway answered by the teacher, its records in DIR. */
async function throughTeacher(baseURL: string, dir = mkdtempSync(join(tmp, 'rec-'))) {
  const file = await RecordFile.open(dir);
  const gateway = new Gateway({
    answerer: new TeacherAnswerer({ baseURL, model: TEACHER, modelName: STUDENT, maxRetries: 0 }),
    modelName: STUDENT,
    runId: 'teacher-test',
    agent: { id: 'agent', version: 'test', options: {} },
    openOnRequest: true,
    onRecord: (r) => file.append(r),
  });
  const server = new ChatServer({ gateway });
  await server.listen(0, '127.0.0.1');
  const client = (episode: string) =>
    new OpenAI({ apiKey: 'none', baseURL: server.url, maxRetries: 0, defaultHeaders: { [EPISODE_HEADER]: episode } });
  const reward = (episode: string, body: unknown) =>
    fetch(`${server.url}/episodes/${encodeURIComponent(episode)}/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const records = () =>
    readFileSync(file.path, 'utf8')
      .trim()
      .split('\n')
      .map((line, i) => parseRecordLine(line, i + 1));
  const close = async () => {
    await server.close();
    await gateway.close();
  };
  return { server, client, reward, records, close, path: file.path };
}

/** The teacher asked directly (greedy: the same request gets the same answer). */
const direct = (body: Omit<OpenAI.ChatCompletionCreateParamsNonStreaming, 'model'>) =>
  new OpenAI({ apiKey: 'none', baseURL: teacher.url, maxRetries: 0 }).chat.completions.create({
    ...body,
    model: TEACHER,
  });

/** The second request an agent loop sends after a tool call, as the openai package sends it (content null). */
function followUp(message: OpenAI.ChatCompletionMessage): OpenAI.ChatCompletionMessageParam[] {
  const call = message.tool_calls![0]!;
  return [
    ...prompt,
    { role: 'assistant', content: null, tool_calls: message.tool_calls },
    { role: 'tool', tool_call_id: call.id, content: task.answer! },
  ];
}

test('a teacher through the gateway: episodes recorded as text-only records of its answers; RL refuses them, SFT reads their text', async (t) => {
  const g = await throughTeacher(teacher.url);
  try {
    const expected: string[][] = [];
    for (const [episode, stream] of [
      ['teach-1', false],
      ['teach-2', true],
    ] as const) {
      const client = g.client(episode);
      const ask = { messages: prompt, tools, temperature: 0, max_tokens: 40, seed: 7 };
      const first = await client.chat.completions.create({ ...ask, model: STUDENT });
      // The client gets the teacher's completion under the model name it asked for.
      t.is(first.model, STUDENT);
      const message = first.choices[0]!.message;
      t.true((message.tool_calls?.length ?? 0) > 0, 'the teacher calls a tool');
      t.is(first.choices[0]!.finish_reason, 'tool_calls');
      t.is((first.choices[0] as { token_ids?: unknown }).token_ids, undefined, "the teacher's ids are not passed on");
      const taught = await direct(ask);
      // The teacher's call (its id aside: each completion draws its own).
      const fn = (m: OpenAI.ChatCompletionMessage) => m.tool_calls!.map((c) => (c as { function: unknown }).function);
      t.deepEqual(fn(message), fn(taught.choices[0]!.message));
      const second = { messages: followUp(message), tools, temperature: 0, max_tokens: 40 };
      let answer = '';
      if (stream) {
        // Streamed: the server streams the teacher's finished completion.
        const chunks = await client.chat.completions.create({ ...second, model: STUDENT, stream: true });
        for await (const chunk of chunks) {
          t.is(chunk.model, STUDENT);
          answer += chunk.choices[0]?.delta.content ?? '';
        }
      } else {
        answer =
          (await client.chat.completions.create({ ...second, model: STUDENT })).choices[0]!.message.content ?? '';
      }
      const secondTaught = await direct(second);
      t.is(answer, secondTaught.choices[0]!.message.content ?? '');
      const action = (m: OpenAI.ChatCompletionMessage) => assistantToAction(m as AssistantMessage);
      expected.push([action(taught.choices[0]!.message), action(secondTaught.choices[0]!.message)]);
      const res = await g.reward(episode, { reward: 1, success: true });
      t.is(res.status, 200);
    }

    // In DIR/episodes.jsonl, sealed and schema-checked (parseRecordLine), marked text-only.
    const records = g.records();
    t.deepEqual(
      records.map((r) => r.episodeId),
      ['teach-1', 'teach-2'],
    );
    for (const [i, r] of records.entries()) {
      t.deepEqual(r.policy, { id: `openai:${TEACHER}@${teacher.url}`, version: TEACHER, textOnly: true });
      t.is(r.promptTokens, undefined);
      t.deepEqual(
        r.turns.map((turn) => turn.text),
        expected[i],
      );
      t.true(r.turns[0]!.text.startsWith('<tool_call>'), 'tool calls as Hermes text');
      t.is(r.turns[0]!.observation, task.answer!);
      for (const turn of r.turns) {
        t.is(turn.tokens, undefined);
        t.is(turn.logprobs, undefined);
        t.is(turn.tokenCount, 0);
      }
      t.deepEqual(parseRecordLine(serializeRecord(r)), r);
      // Replay checks what can be checked without ids (checksum, answers, the stored requests).
      t.is(checkAgentRecord(r), undefined);
    }
    // The seed the gateway used is the one the client sent, and the teacher was sent it.
    t.is(records[0]!.turns[0]!.info!.seed, 7);

    // RL refuses them, naming why; never a gradient on ids our model did not sample.
    const refusal = { instanceOf: TextOnlyRecordError, message: /text-only record .*SFT data .*never RL data/ };
    t.throws(() => buildTrajectories(records), refusal);
    t.throws(() => buildTrajectory(records[0]!), refusal);
    t.throws(() => buildStepTrajectories(records[0]!), refusal);
    t.throws(() => recordTokens(records[0]!), refusal);

    // SFT reads their text: each action's ids are the encoding of the teacher's answer.
    const encoding = chatEncoding(trainTokenizer(recordTexts(records), { vocabSize: 400 }));
    const sequences = sequencesFromRecords(records, encoding);
    t.is(sequences.length, 2);
    for (const r of records) {
      const { tokens, actions } = recordTokens(r, { encoding });
      t.deepEqual(
        actions.map(({ start, end }) => tokens.slice(start, end)),
        r.turns.map((turn) => encoding.action(turn.text)),
      );
    }
  } finally {
    await g.close();
  }
});

test('the teacher unreachable: a 502 naming it, and the episode goes on once the teacher is back', async (t) => {
  const down = new ChatServer({ policy, modelName: TEACHER });
  await down.listen(0, '127.0.0.1');
  const url = down.url;
  const port = Number(new URL(url).port);
  const g = await throughTeacher(url);
  try {
    const client = g.client('flaky');
    const ask = { model: STUDENT, messages: prompt, tools, temperature: 0, max_tokens: 40 };
    const first = await client.chat.completions.create(ask);
    await down.close();
    const second = { ...ask, messages: followUp(first.choices[0]!.message) };
    const err = (await client.chat.completions.create(second).catch((e: unknown) => e)) as APIError;
    t.is(err.status, 502);
    t.is(err.code, 'teacher_error');
    t.regex(err.message, new RegExp(`the teacher at ${url} gave no answer: .*ECONNREFUSED`));
    // The teacher comes back on its address: the turn is sent again, and the episode is whole.
    const back = new ChatServer({ policy, modelName: TEACHER });
    await back.listen(port, '127.0.0.1');
    try {
      await client.chat.completions.create(second);
      const res = await g.reward('flaky', { reward: 1 });
      t.is(res.status, 200);
      t.like(await res.json(), { episode_id: 'flaky', turns: 2 });
    } finally {
      await back.close();
    }
  } finally {
    await g.close();
  }
});

/** A broken teacher: answers each path under /v1 as `answers` says. */
async function brokenTeacher(answers: { [path: string]: [number, string] }): Promise<Server & { url: string }> {
  const server = createServer((req, res) => {
    req.resume();
    const [status, body] = answers[req.url ?? ''] ?? [404, 'no'];
    res.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(server, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

test('a teacher that answers no completion: a 502 with the reason; a bad model name or teacher URL is refused', async (t) => {
  const broken = await brokenTeacher({
    '/html/v1/chat/completions': [200, '<html>a proxy page</html>'],
    '/empty/v1/chat/completions': [200, '{"choices": []}'],
    '/refuses/v1/chat/completions': [400, '{"error": {"message": "no such model"}}'],
    '/none/v1/models': [200, '{"data": []}'],
  });
  try {
    for (const [path, why] of [
      ['html', /gave no answer: .*answered 200 with a body that is not JSON: <html>a proxy page/],
      ['empty', /answered something that is not a chat completion: the completion has no choices\[0\]\.message/],
      ['refuses', /gave no answer: .*answered 400: no such model/],
    ] as const) {
      const g = await throughTeacher(`${broken.url}/${path}/v1`);
      try {
        const client = g.client(`ep-${path}`);
        const err = (await client.chat.completions
          .create({ model: STUDENT, messages: prompt })
          .catch((e: unknown) => e)) as APIError;
        t.is(err.status, 502, path);
        t.regex(err.message, why);
        // The episode is open, with no turn: its reward is refused as coming before any turn.
        t.is((await g.reward(`ep-${path}`, { reward: 1 })).status, 400);
        // A model name the gateway does not serve is the client's mistake (400), not the teacher's.
        const wrong = (await client.chat.completions
          .create({ model: TEACHER, messages: prompt })
          .catch((e: unknown) => e)) as APIError;
        t.is(wrong.status, 400);
        t.is(wrong.code, 'model_not_found');
      } finally {
        await g.close();
      }
    }
    await t.throwsAsync(teacherModel(`${broken.url}/none/v1`), { instanceOf: TeacherError, message: /lists no model/ });
    await t.throwsAsync(teacherModel(`${broken.url}/html/v1`, { maxRetries: 0 }), {
      instanceOf: TeacherError,
      message: /did not list its models \(give --teacher-model NAME\): .*answered 404/,
    });
    t.is(await teacherModel(teacher.url), TEACHER);
    // A teacher that wants a key it was not given: its 401, passed on as the teacher's failure.
    const keyed = new ChatServer({ policy, modelName: TEACHER, apiKey: 'sk-teacher' });
    await keyed.listen(0, '127.0.0.1');
    try {
      const ask = { model: STUDENT, messages: [{ role: 'user' as const, content: 'What is 2 + 2?' }], max_tokens: 4 };
      const keyless = new TeacherAnswerer({ baseURL: keyed.url, model: TEACHER, modelName: STUDENT });
      await t.throwsAsync(keyless.complete(ask), {
        instanceOf: TeacherError,
        message: /answered 401: missing API key/,
      });
      const withKey = new TeacherAnswerer({
        baseURL: keyed.url,
        model: TEACHER,
        modelName: STUDENT,
        apiKey: 'sk-teacher',
      });
      t.is((await withKey.complete(ask)).model, STUDENT);
    } finally {
      await keyed.close();
    }
    for (const bad of ['not a url', 'ftp://host/v1', ''])
      t.throws(() => teacherBaseURL(bad), { instanceOf: TeacherUrlError, message: /is not an http\(s\) URL/ });
    t.is(teacherBaseURL('http://127.0.0.1:8000/v1/'), 'http://127.0.0.1:8000/v1');
  } finally {
    broken.close();
  }
});

test.serial(
  'agent-r1 serve --policy openai:URL --record DIR: a teacher behind the CLI; its records export and replay as text-only',
  async (t) => {
    const dir = join(tmp, 'served');
    // A teacher that wants a key (a hosted API's way): the key comes from AGENT_R1_TEACHER_API_KEY.
    const keyed = new ChatServer({ policy, modelName: TEACHER, apiKey: 'sk-teacher' });
    await keyed.listen(0, '127.0.0.1');
    const child = spawn(
      process.execPath,
      cliArgs(['serve', '--policy', `openai:${keyed.url}`, '--port', '0', '--record', dir, '--json', '--quiet']),
      { cwd: repoRoot, env: { ...process.env, AGENT_R1_TEACHER_API_KEY: 'sk-teacher' } },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', () => reject(new Error(`serve exited: ${stderr}`)));
      });
      const { url, model, version, teacher: id, records } = JSON.parse(line);
      // The teacher's model is the first it lists; clients ask for it by that name unless --model-name.
      t.is(model, TEACHER);
      t.is(version, TEACHER);
      t.is(id, `openai:${TEACHER}@${keyed.url}`);
      for (const episode of ['cli-1', 'cli-2']) {
        const client = new OpenAI({
          apiKey: 'none',
          baseURL: url,
          maxRetries: 0,
          defaultHeaders: { [EPISODE_HEADER]: episode },
        });
        const ask = { model: TEACHER, tools, temperature: 0, max_tokens: 40 };
        const first = await client.chat.completions.create({ ...ask, messages: prompt });
        await client.chat.completions.create({ ...ask, messages: followUp(first.choices[0]!.message) });
        const res = await fetch(`${url}/episodes/${episode}/reward`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ reward: 1 }),
        });
        t.is(res.status, 200);
      }
      child.kill('SIGTERM');
      t.is(await exited, 0);
      t.regex(
        stderr,
        /serving "calc-tiny" \(the teacher openai:calc-tiny@http:\/\/127\.0\.0\.1:\d+\/v1, recorded as text-only records\)/,
      );
      t.is(records, join(dir, 'episodes.jsonl'));
      const written: EpisodeRecord[] = readFileSync(records, 'utf8')
        .trim()
        .split('\n')
        .map((l, i) => parseRecordLine(l, i + 1));
      t.deepEqual(
        written.map((r) => [r.episodeId, r.status, r.turns.length, r.policy.textOnly]),
        [
          ['cli-1', 'ok', 2, true],
          ['cli-2', 'ok', 2, true],
        ],
      );
      const replayed = cli(['replay', records]);
      t.is(replayed.code, 0, replayed.stdout);
      t.regex(replayed.stdout, /verified cli-1 \(text-only: a teacher's answers, no ids to check\)/);
      // SFT data for Python trainers too: the messages export.
      const out = join(tmp, 'teacher.messages.jsonl');
      const exported = cli(['export', dir, '--format', 'messages', '--out', out]);
      t.is(exported.code, 0, exported.stderr);
      const rows = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      t.is(rows.length, 2);
      t.is(rows[0].messages.filter((m: { role: string }) => m.role === 'assistant').length, 2);
    } finally {
      child.kill('SIGKILL');
      await keyed.close();
    }
  },
);

test.serial(
  'agent-r1 serve --policy openai:URL refuses a URL that is not one, no --record, and teacher flags elsewhere',
  (t) => {
    const notUrl = cli(['serve', '--policy', 'openai:qwen@http://127.0.0.1:8000/v1', '--record', join(tmp, 'x')]);
    t.is(notUrl.code, 2);
    t.is(notUrl.stderr.trim().split('\n').length, 1, notUrl.stderr);
    t.regex(notUrl.stderr, /"qwen@http:\/\/127\.0\.0\.1:8000\/v1" is not an http\(s\) URL .*--teacher-model/);
    const noRecord = cli(['serve', '--policy', 'openai:http://127.0.0.1:9/v1']);
    t.is(noRecord.code, 2);
    t.regex(
      noRecord.stderr,
      /give --record DIR \(to only use the teacher, point clients at http:\/\/127\.0\.0\.1:9\/v1\)/,
    );
    const unknown = cli(['serve', '--policy', 'gpt-4o']);
    t.is(unknown.code, 2);
    t.regex(unknown.stderr, /unknown policy to serve "gpt-4o"; valid: ckpt:DIR, hf:DIR, openai:URL \(with --record\)/);
    const elsewhere = cli(['serve', '--policy', 'ckpt:x', '--teacher-model', 'm']);
    t.is(elsewhere.code, 2);
    t.regex(elsewhere.stderr, /--teacher-model is for --policy openai:URL/);
    // No model named and none listed (nothing listens there): said at once, naming the teacher.
    const unreachable = cli(['serve', '--policy', 'openai:http://127.0.0.1:9/v1', '--record', join(tmp, 'y')]);
    t.is(unreachable.code, 1);
    t.regex(
      unreachable.stderr,
      /the teacher at http:\/\/127\.0\.0\.1:9\/v1 did not list its models \(give --teacher-model NAME\)/,
    );
  },
);
