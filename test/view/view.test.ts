import test from 'ava';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { setup } from 'xstate';
import { calculator } from '../../scenarios/calculator/index.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import { episodeMachine } from '../../machines/episode.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import { canonicalJson } from '../../src/core/canonical-json.ts';
import { parseRecordLine, sealRecord, serializeRecord } from '../../src/record/record.ts';
import { CorruptRecordError } from '../../src/core/errors.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { groupAdvantages } from '../../src/view/advantages.ts';
import { pathMarks, renderDiagram } from '../../src/view/diagram-svg.ts';
import { EpisodeIndex } from '../../src/view/episode-index.ts';
import { RunDirError, ViewerStartError, ViewRequestError } from '../../src/view/errors.ts';
import { escapeHtml, html } from '../../src/view/html.ts';
import { layerNodes, machineGraph } from '../../src/view/machine-graph.ts';
import { episodePath, episodeView, worldPath } from '../../src/view/pages/episode.ts';
import { gridworld } from '../../scenarios/gridworld/index.ts';
import { helpdesk } from '../../scenarios/helpdesk/index.ts';
import { parseEpisodeQuery } from '../../src/view/pages/run.ts';
import { buildReport, pickExamples } from '../../src/view/report.ts';
import { parseMetrics, readRunDir, runNames } from '../../src/view/run-dir.ts';
import { startViewer } from '../../src/view/server.ts';
import { renderTokens } from '../../src/view/tokens.ts';

const scenario = calculator as unknown as Scenario;
let records: EpisodeRecord[] = [];

test.before(async () => {
  const policy = await scenario.policies.random!({ scenario, seed: 3 });
  records = (await rollout({ scenario, policy, split: 'train', episodes: 12, seed: 3, group: 4 })).records;
});

const made: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
};
test.after.always(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

function runDir(lines: string[], extra: Record<string, string> = {}): string {
  const dir = tempDir('view-unit-');
  writeFileSync(join(dir, 'episodes.jsonl'), lines.map((l) => l + '\n').join(''));
  for (const [name, text] of Object.entries(extra)) writeFileSync(join(dir, name), text);
  return dir;
}

test('html escapes every interpolated value, but not nested fragments', (t) => {
  const evil = '<script>alert(1)</script><img src=x onerror="x()">\'&';
  const out = html`<p title="${evil}">${evil}${html`<b>${evil}</b>`}</p>`.value;
  t.false(out.includes('<script>'));
  t.false(out.includes('<img'));
  t.true(out.includes('<b>&lt;script&gt;'));
  t.is(escapeHtml(`"'&<>`), '&quot;&#39;&amp;&lt;&gt;');
});

test('the episode machine graph is read from its definition', (t) => {
  const g = machineGraph(episodeMachine);
  t.deepEqual(
    g.nodes.map((n) => n.id),
    Object.keys(episodeMachine.root.states),
  );
  t.is(g.initial, 'generate');
  const edge = (from: string, to: string) => g.edges.find((e) => e.from === from && e.to === to);
  // The synchronous stages are actions of the transitions, named on their edges.
  t.deepEqual(edge('generate', 'execute')?.labels, ['GENERATED [callsTools] / parseToolCall']);
  t.deepEqual(edge('transition', 'generate')?.labels, ['TRANSITIONED / reward']);
  t.deepEqual(edge('transition', 'outcome')?.labels, ['TRANSITIONED [finished] / reward', 'FAILED / fail']);
  t.deepEqual(edge('execute', 'transition')?.labels, ['EXECUTED'], 'an inline assign has no name to show');
  // The step-level MDP: the ToolEnv's context is a state of its own, between a turn and the next.
  t.deepEqual(edge('transition', 'context')?.labels, ['TRANSITIONED [stepLevel] / reward']);
  t.deepEqual(edge('context', 'generate')?.labels, ['CONTEXTED / context']);
  t.truthy(edge('generate', 'outcome'));
  t.true(g.nodes.find((n) => n.id === 'done')!.final);
  const layers = layerNodes(g);
  t.true(layers.get('generate')! < layers.get('transition')! && layers.get('transition')! < layers.get('done')!);
});

test('the diagram marks the visited states and the transitions taken', (t) => {
  const g = machineGraph(episodeMachine);
  const record = records.find((r) => r.turns.some((turn) => turn.states.includes('execute')))!;
  const marks = pathMarks(g, episodePath(record));
  const svg = renderDiagram(g, marks).value;
  const visited = [...svg.matchAll(/class="node visited" data-state="([^"]+)" data-visits="(\d+)"/g)].map((m) => [
    m[1],
    Number(m[2]),
  ]);
  // The path also names the stages that are actions (parseToolCall, reward); they are no nodes.
  const states = new Set(g.nodes.map((n) => n.id));
  const expected = new Map<string, number>();
  for (const s of episodePath(record)) if (states.has(s)) expected.set(s, (expected.get(s) ?? 0) + 1);
  t.deepEqual(Object.fromEntries(visited), Object.fromEntries(expected));
  t.true(svg.includes('class="edge taken" data-from="generate" data-to="execute"'));
  t.true(svg.includes('class="edge taken" data-from="transition" data-to="generate"') === record.turns.length > 1);
});

test('a world machine with nested and parallel states is drawn; its states are found in tool results', (t) => {
  const world = setup({}).createMachine({
    id: 'door',
    type: 'parallel',
    states: {
      lock: { initial: 'locked', states: { locked: { on: { UNLOCK: 'open' } }, open: { type: 'final' } } },
      light: { initial: 'off', states: { off: { on: { FLIP: 'on' } }, on: { on: { FLIP: 'off' } } } },
    },
  });
  const g = machineGraph(world);
  t.deepEqual(g.nodes.map((n) => n.id).sort(), ['light.off', 'light.on', 'lock.locked', 'lock.open']);
  t.deepEqual(g.edges.find((e) => e.from === 'lock.locked')?.to, 'lock.open');
  const record = {
    turns: [
      {
        ...records[0]!.turns[0]!,
        results: [{ name: 'x', ok: true, content: '', data: { door: { state: 'open' }, status: 'nope' } }],
      },
    ],
  };
  t.deepEqual(worldPath(record, g), ['open']);
  const svg = renderDiagram(g, pathMarks(g, worldPath(record, g))).value;
  t.regex(svg, /class="node visited" data-state="lock.open"/);
});

test('metrics.jsonl: every numeric field is a curve (nested ones dotted); evals apart; bad lines reported', (t) => {
  const text = [
    '{"kind":"step","step":0,"reward":1,"kl":0.1,"note":"x","outcome":{"em":0.5},"time":{"tokensPerS":900}}',
    'not json',
    '{"reward":2}',
    '',
    '{"step":1,"clipFraction":0.2,"bad":null}',
    '{"kind":"eval","step":1,"split":"dev","reward":0.7,"outcome":{"em":0.6},"summary":{"byType":{"add":{"em":1}}}}',
  ].join('\n');
  const { rows, fields, evals, warnings } = parseMetrics(text);
  t.deepEqual(fields, ['reward', 'kl', 'outcome.em', 'time.tokensPerS', 'clipFraction']);
  t.deepEqual(rows, [
    { step: 0, reward: 1, kl: 0.1, 'outcome.em': 0.5, 'time.tokensPerS': 900 },
    { step: 1, clipFraction: 0.2 },
  ]);
  t.deepEqual(evals, [
    { step: 1, split: 'dev', values: { reward: 0.7, 'outcome.em': 0.6 }, summary: { byType: { add: { em: 1 } } } },
  ]);
  t.deepEqual(warnings, [
    'metrics.jsonl line 2: not valid JSON',
    'metrics.jsonl line 3: needs an object with a numeric "step"',
  ]);
});

test('run directories: missing, empty and malformed ones get clear errors', (t) => {
  t.throws(() => readRunDir('/no/such/run'), { instanceOf: RunDirError, message: /does not exist/ });
  const empty = tempDir('view-empty-');
  t.throws(() => readRunDir(empty), { instanceOf: RunDirError, message: /not a run directory/ });
  const dir = runDir([serializeRecord(records[0]!)], {
    'summary.json': '[1,2]',
    'eval-test.json': '{"em": 0.5}',
    'eval-bad.json': '{',
  });
  mkdirSync(join(dir, 'ckpt-10'));
  writeFileSync(join(dir, 'ckpt-10', 'tokenizer.json'), '{}');
  mkdirSync(join(dir, 'checkpoints', 'step-000004', 'policy'), { recursive: true });
  writeFileSync(join(dir, 'checkpoints', 'step-000004', 'policy', 'model.json'), '{}');
  const info = readRunDir(dir);
  t.is(info.summary, undefined);
  t.deepEqual(info.evals, [{ file: 'eval-test.json', data: { em: 0.5 } }]);
  t.is(info.warnings.length, 2);
  t.deepEqual(info.checkpoints, ['checkpoints/step-000004', 'checkpoints/step-000004/policy', 'ckpt-10']);
  t.is(info.tokenizerPath, join(dir, 'ckpt-10', 'tokenizer.json'));
  t.deepEqual(runNames(['a/run', 'b/run', 'c/other']), ['run', 'run-2', 'other']);
});

test('the index pages, filters and searches; corrupt lines are counted, appended lines picked up', (t) => {
  const lines = records.map(serializeRecord);
  const tampered = serializeRecord({ ...records[1]!, totalReward: 99 });
  const dir = runDir([...lines.slice(0, 3), 'not json', tampered, ...lines.slice(3)]);
  const index = EpisodeIndex.open(join(dir, 'episodes.jsonl'));
  t.is(index.size, records.length + 1);
  t.deepEqual(
    index.corrupt.map((c) => c.line),
    [4],
  );
  // The tampered line is listed (its summary parses) but refused when read: its checksum fails.
  t.throws(() => index.read(3), { message: /checksum/ });
  t.is(canonicalJson(index.read(0)), canonicalJson(records[0]));
  const answered = index.filter({ endReason: 'answered' }).map((e) => e.episodeId);
  t.deepEqual(
    answered,
    [...records.slice(0, 3), records[1]!, ...records.slice(3)]
      .filter((r) => r.endReason === 'answered')
      .map((r) => r.episodeId),
  );
  // Search is a case-insensitive substring of the generated text: exactly the episodes containing it.
  const needle = records[5]!.turns[0]!.text.slice(0, 40).toUpperCase();
  const inFile = [...records.slice(0, 3), records[1]!, ...records.slice(3)];
  const contains = (r: EpisodeRecord) => r.turns.some((x) => x.text.toUpperCase().includes(needle));
  t.deepEqual(
    index.filter({ q: needle }).map((e) => e.ordinal),
    inFile.flatMap((r, i) => (contains(r) ? [i] : [])),
  );
  t.true(index.filter({ q: needle }).some((e) => e.episodeId === records[5]!.episodeId));
  t.deepEqual(index.filter({ minReward: 1, maxReward: 0 }), []);
  // A writer mid-append: the unfinished line waits, the finished one is indexed.
  appendFileSync(join(dir, 'episodes.jsonl'), lines[0]!.slice(0, 50));
  index.refresh();
  t.is(index.size, records.length + 1);
  appendFileSync(join(dir, 'episodes.jsonl'), lines[0]!.slice(50) + '\n');
  index.refresh();
  t.is(index.size, records.length + 2);
  t.is(canonicalJson(index.read(records.length + 1)), canonicalJson(records[0]));
  t.throws(() => EpisodeIndex.open(join(dir, 'nope.jsonl')), { instanceOf: RunDirError });
});

test('episode queries: bad numbers, pages and unknown parameters are rejected', (t) => {
  t.deepEqual(parseEpisodeQuery(new URLSearchParams('split=train&minReward=-0.5&success=yes&q=&page=2')), {
    split: 'train',
    minReward: -0.5,
    success: true,
    page: 2,
  } as never);
  t.throws(() => parseEpisodeQuery(new URLSearchParams('minReward=abc')), {
    instanceOf: ViewRequestError,
    message: /expected a number/,
  });
  t.throws(() => parseEpisodeQuery(new URLSearchParams('page=0')), { instanceOf: ViewRequestError, message: /page/ });
  t.throws(() => parseEpisodeQuery(new URLSearchParams('sucess=yes')), { instanceOf: ViewRequestError });
  t.throws(() => parseEpisodeQuery(new URLSearchParams('success=maybe')), { instanceOf: ViewRequestError });
});

test('GRPO advantages for display are (r − mean)/(std + 1e-6) over the group', (t) => {
  const rs = [1, 0, 0, 1].map((totalReward) => ({ totalReward, turns: [] }));
  const adv = groupAdvantages(rs).map((a) => a.advantage);
  const std = Math.sqrt((4 * 0.25) / 3);
  t.deepEqual(
    adv.map((a) => +a.toFixed(9)),
    [0.5, -0.5, -0.5, 0.5].map((x) => +(x / (std + 1e-6)).toFixed(9)),
  );
  t.deepEqual(groupAdvantages([{ totalReward: 0.7, turns: [] }]), [{ advantage: 0.7 / (1 + 1e-6), recorded: false }]);
});

test('example episodes are the best, median and worst by total reward', (t) => {
  const es = [0.5, 1, -1, 0.2, 0.9].map((totalReward, ordinal) => ({ ordinal, totalReward }) as never);
  t.deepEqual(pickExamples(es), [
    { label: 'best', ordinal: 1 },
    { label: 'median', ordinal: 0 },
    { label: 'worst', ordinal: 2 },
  ]);
  t.deepEqual(pickExamples([]), []);
});

test('tokens are coloured by log-prob and shown as escaped text', (t) => {
  const out = renderTokens([5, 6], [-0.01, -3], (id) => (id === 5 ? '<b>' : 'x')).value;
  t.true(out.includes('&lt;b&gt;'));
  t.regex(out, /logprob -3\.0000/);
  t.regex(renderTokens([7], undefined).value, /⟨7⟩/);
});

test('the report is one self-contained file and refuses a directory with nothing to report', async (t) => {
  const dir = runDir(records.map(serializeRecord), {
    'metrics.jsonl': '{"step":0,"reward":0.1}\n{"step":1,"reward":0.4}\n',
  });
  const report = await buildReport(dir, { scenarios: builtinScenarios });
  t.regex(report, /<svg/);
  t.false(
    /<script|src="http|href="http(?!:\/\/www\.w3\.org)/.test(
      report.replace(/xmlns(:xlink)?="http:\/\/www\.w3\.org[^"]*"/g, ''),
    ),
  );
  t.is((report.match(/data-example="/g) ?? []).length, 3);
  const empty = tempDir('view-nothing-');
  writeFileSync(join(empty, 'metrics.jsonl'), '');
  await t.throwsAsync(buildReport(empty), { instanceOf: RunDirError, message: /nothing to report/ });
});

function get(
  url: string,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url + path, { method, headers }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('the server: loopback only, GET only, clear 400/404s, no script allowed by its CSP', async (t) => {
  const dir = runDir(records.map(serializeRecord));
  const viewer = await startViewer({ dirs: [dir], scenarios: builtinScenarios });
  try {
    t.regex(viewer.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const page = await get(viewer.url, '/run/0');
    t.is(page.status, 200);
    t.regex(String(page.headers['content-security-policy']), /default-src 'none'/);
    t.is((await get(viewer.url, '/')).status, 302);
    t.is((await get(viewer.url, '/run/0', { host: 'attacker.example' })).status, 421);
    t.is((await get(viewer.url, '/run/0', {}, 'POST')).status, 405);
    t.is((await get(viewer.url, '/run/7')).status, 404);
    t.is((await get(viewer.url, '/run/0/episode/999')).status, 404);
    const bad = await get(viewer.url, '/run/0?minReward=%3Cscript%3E');
    t.is(bad.status, 400);
    t.false(bad.body.includes('<script>'));
    const api = JSON.parse((await get(viewer.url, '/api/run/0/episodes?endReason=answered')).body);
    t.is(api.total, records.filter((r) => r.endReason === 'answered').length);
    t.is(canonicalJson(JSON.parse((await get(viewer.url, '/api/run/0/episode/2')).body)), canonicalJson(records[2]));
    const port = Number(new URL(viewer.url).port);
    await t.throwsAsync(startViewer({ dirs: [dir], port }), {
      instanceOf: ViewerStartError,
      message: new RegExp(`port ${port} is in use`),
    });
    await t.throwsAsync(startViewer({ dirs: [dir], port: 70000 }), { instanceOf: ViewerStartError });
  } finally {
    await viewer.close();
  }
});

test('the index re-indexes a rewritten file (longer, shorter, a new file) and scans an unfinished line once', (t) => {
  const lines = records.map(serializeRecord);
  const dir = runDir(lines.slice(0, 4));
  const path = join(dir, 'episodes.jsonl');
  const index = EpisodeIndex.open(path);
  const ids = () => index.episodes.map((e) => e.episodeId);
  t.deepEqual(
    ids(),
    records.slice(0, 4).map((r) => r.episodeId),
  );
  // Rewritten in place (a rollout --force into the same run): other records, more of them.
  writeFileSync(
    path,
    lines
      .slice(4)
      .map((l) => l + '\n')
      .join(''),
  );
  index.refresh();
  t.deepEqual(
    ids(),
    records.slice(4).map((r) => r.episodeId),
  );
  t.deepEqual(index.corrupt, []);
  t.is(canonicalJson(index.read(0)), canonicalJson(records[4]));
  // Shorter, then replaced by another file (a new inode) holding the first records again.
  writeFileSync(path, lines[5] + '\n');
  index.refresh();
  t.deepEqual(ids(), [records[5]!.episodeId]);
  writeFileSync(
    `${path}.new`,
    lines
      .slice(0, 2)
      .map((l) => l + '\n')
      .join(''),
  );
  renameSync(`${path}.new`, path);
  index.refresh();
  t.deepEqual(
    ids(),
    records.slice(0, 2).map((r) => r.episodeId),
  );
  // A huge unfinished last line is searched once; refreshes while it stays as it is cost nothing.
  appendFileSync(path, `{"episodeId": "${'x'.repeat(8 * 2 ** 20)}`);
  index.refresh();
  const started = performance.now();
  for (let i = 0; i < 50; i++) index.refresh();
  t.true(performance.now() - started < 250, `${performance.now() - started} ms for 50 refreshes`);
  appendFileSync(path, '"}\n' + lines[3] + '\n');
  index.refresh();
  t.deepEqual(
    ids(),
    [...records.slice(0, 2), records[3]!].map((r) => r.episodeId),
  );
  t.is(index.corrupt.length, 1);
  t.regex(index.corrupt[0]!.error, /not an episode record/);
  // Deleted: empty and gone, not an error.
  rmSync(path);
  index.refresh();
  t.true(index.gone);
  t.is(index.size, 0);
});

test('the index takes only records whose table fields have their types; a future schema says which', async (t) => {
  const good = serializeRecord(records[0]!);
  const dir = runDir([
    '{"episodeId":"yy","turns":[],"task":{},"endReason":"answered","type":"x"}',
    '{"episodeId":"zz","turns":[],"task":{}}',
    good,
    JSON.stringify({ ...records[1], schema: 99 }),
  ]);
  const index = EpisodeIndex.open(join(dir, 'episodes.jsonl'));
  t.deepEqual(
    index.episodes.map((e) => e.episodeId),
    [records[0]!.episodeId],
  );
  t.deepEqual(
    index.corrupt.map((c) => c.line),
    [1, 2, 4],
  );
  t.regex(index.corrupt[2]!.error, /record schema version 99; this agent-r1 reads version 1 \(written by a newer/);
  // The report once took these lines for episodes and crashed sorting their undefined fields.
  t.regex(await buildReport(dir, { replay: false }), /3 corrupt lines in episodes\.jsonl were skipped/);
});

test('a record nested 1,600 levels deep, sealed with a valid checksum: the report says the line is corrupt and why, and goes on', async (t) => {
  let deep: unknown = 1;
  for (let i = 0; i < 1600; i++) deep = { a: deep };
  const { checksum: _c, ...rest } = records[1]!;
  const line = serializeRecord(sealRecord({ ...rest, task: { ...rest.task, meta: { deep } } } as typeof rest));
  t.throws(() => parseRecordLine(line, 2), {
    instanceOf: CorruptRecordError,
    message: /line 2: nests deeper than 256 levels of objects and arrays/,
  });
  // The median of three is the deep one: the report shows why it is not shown.
  const dir = runDir([serializeRecord(records[0]!), line, serializeRecord(records[2]!)]);
  t.regex(await buildReport(dir, { replay: false }), /episode: line 2: nests deeper than 256 levels/);
});

test('the viewer: a deleted episodes.jsonl is a page that says so; only plain digits are ids', async (t) => {
  const dir = runDir(records.map(serializeRecord), { 'summary.json': '{"episodes": 12}' });
  const viewer = await startViewer({ dirs: [dir], scenarios: builtinScenarios });
  try {
    for (const id of ['1e0', '0x1', '%20', '-0', '01', '1.0', '+1']) {
      t.is((await get(viewer.url, `/run/0/episode/${id}`)).status, 404, `episode ${id}`);
      t.is((await get(viewer.url, `/api/run/0/episode/${id}`)).status, 404, `api episode ${id}`);
      t.is((await get(viewer.url, `/run/${id}`)).status, 404, `run ${id}`);
    }
    t.is((await get(viewer.url, '/run/0/episode/1')).status, 200);
    rmSync(join(dir, 'episodes.jsonl'));
    const page = await get(viewer.url, '/run/0');
    t.is(page.status, 200);
    t.regex(page.body, /episodes\.jsonl was deleted while the viewer ran/);
    const episode = await get(viewer.url, '/run/0/episode/1');
    t.is(episode.status, 404);
    t.regex(episode.body, /has no episodes\.jsonl \(it was deleted\)/);
    t.false(episode.body.includes('ENOENT'));
    rmSync(join(dir, 'summary.json'));
    const emptied = await get(viewer.url, '/run/0');
    t.is(emptied.status, 404);
    t.regex(emptied.body, /is not a run directory/);
    writeFileSync(join(dir, 'episodes.jsonl'), serializeRecord(records[2]!) + '\n');
    const back = JSON.parse((await get(viewer.url, '/api/run/0/episodes')).body);
    t.is(back.total, 1);
  } finally {
    await viewer.close();
  }
});

test("a step-level episode shows each step's context, collapsed where it only grew by the last turn", async (t) => {
  const grid = gridworld as unknown as Scenario;
  const policy = await grid.policies.expert!({ scenario: grid, seed: 1 });
  const run = async (context: string) =>
    (await rollout({ scenario: grid, policy, split: 'train', episodes: 1, seed: 4, config: { context } })).records[0]!;
  const view = (r: EpisodeRecord) => episodeView({ record: r, episodeGraph: machineGraph(episodeMachine) }).value;
  const windowed = view(await run('window:2'));
  // Step 1 of a window of 2 is the history so far; step 3 drops the first turn.
  t.true(windowed.includes('data-context="extends"'));
  t.true(windowed.includes('data-context="new"'));
  const card = await run('card');
  const carded = view(card);
  t.is((carded.match(/data-context="new"/g) ?? []).length, card.turns.length - 1);
  t.true(carded.includes('key not carried; door locked. Next: the key'));
  t.false(view(records[0]!).includes('data-context'), 'a concatenated episode shows no contexts');
});

test("a conversation's episode shows the user's replies: its steps, its own tool calls and results, and its end", async (t) => {
  const desk = helpdesk as unknown as Scenario;
  const policy = await desk.policies.expert!({ scenario: desk, seed: 1 });
  const record = (await rollout({ scenario: desk, policy, split: 'test', episodes: 1, seed: 1 })).records[0]!;
  const page = episodeView({ record, episodeGraph: machineGraph(episodeMachine) }).value;
  t.is((page.match(/data-role="user"/g) ?? []).length, record.turns.filter((turn) => turn.reply).length);
  t.true(page.includes('<b class="call-name">check_status</b>'));
  t.true(page.includes('ended the conversation'));
  t.true(page.includes('###STOP###'));
});
