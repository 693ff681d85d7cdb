/**
 * The viewer and the report in a real browser: headless Chromium (from npm, see helpers/chromium.ts)
 * driven by playwright-core.
 * Runs are made here with the calculator scenario (random, expert and a scripted policy whose
 * text is hostile markup); screenshots go to test-artifacts/. Slow (a browser, and runs made for it):
 * `npm run test:slow`; the pages' HTML and escaping are checked without a browser in view.test.ts.
 */
import test from 'ava';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { calculator } from '../../scenarios/calculator/index.ts';
import { builtinScenarios } from '../../scenarios/index.ts';
import type { EpisodeRecord } from '../../src/core/types.ts';
import type { Policy } from '../../src/policy/policy.ts';
import { CHROMIUM_ARGS, chromiumExecutable } from '../helpers/chromium.ts';
import { serializeRecord } from '../../src/record/record.ts';
import { rollout } from '../../src/rollout/rollout.ts';
import type { Scenario } from '../../src/scenario/scenario.ts';
import { trainTokenizer } from '../../src/policy/tfjs/tokenizer.ts';
import { groupAdvantages } from '../../src/view/advantages.ts';
import { buildReport } from '../../src/view/report.ts';
import { startViewer, type Viewer } from '../../src/view/server.ts';

const ARTIFACTS = resolve('test-artifacts');
const scenario = calculator as unknown as Scenario;

const XSS_CALL = '<script>window.__pwned = "script"</script>';
const XSS_ANSWER = '<img src=x onerror="window.__pwned = \'img\'"><b>bold?</b>';

const tokenizer = trainTokenizer([`<answer>${XSS_ANSWER}</answer>`, 'the answer is bold'], {
  vocabSize: 300,
  minFrequency: 1,
});

/**
 * A scripted policy whose actions carry markup: the record is genuine (sealed, replayable). Its
 * answer turn comes with token ids and log-probs, as a model policy's would.
 */
const hostile: Policy = {
  id: 'hostile',
  version: 'hostile-1',
  act: async ({ turn }) => {
    if (turn === 0)
      return {
        text: `Thinking ${XSS_CALL} <tool_call>{"name": "calculate", "arguments": {"expression": ${JSON.stringify(XSS_CALL)}}}</tool_call>`,
      };
    const text = `<answer>${XSS_ANSWER}</answer>`;
    const tokens = tokenizer.encode(text);
    return { text, tokens, logprobs: tokens.map((_, i) => -0.4 * (i % 6)) };
  },
};

let browser: Browser | undefined;
let viewer: Viewer;
let records: EpisodeRecord[] = [];
let runDir: string;
let secondDir: string;

test.before(async () => {
  runDir = mkdtempSync(join(tmpdir(), 'viewer-run-'));
  const parts: EpisodeRecord[][] = [];
  let offset = 0;
  for (const [policy, episodes] of [
    [await scenario.policies.random!({ scenario, seed: 7 }), 16],
    [await scenario.policies.expert!({ scenario, seed: 7 }), 8],
    [hostile, 1],
  ] as const) {
    const out = await rollout({ scenario, policy, split: 'train', episodes, seed: 7, group: 4, indexOffset: offset });
    parts.push(out.records);
    offset += episodes;
  }
  records = parts.flat();
  writeFileSync(join(runDir, 'episodes.jsonl'), records.map((r) => serializeRecord(r) + '\n').join(''));
  writeFileSync(
    join(runDir, 'summary.json'),
    JSON.stringify({
      episodes: records.length,
      successRate: records.filter((r) => r.outcome.success).length / records.length,
    }),
  );
  writeFileSync(
    join(runDir, 'eval-test.json'),
    JSON.stringify({ split: 'test', em: 0.62, byType: { add: { em: 0.7, n: 10 }, divide: { em: 0.5, n: 10 } } }),
  );
  // metrics.jsonl as the trainer writes it: step lines (nested outcome and time) and eval lines.
  const metrics = Array.from({ length: 12 }, (_, i) => ({
    kind: 'step',
    step: i + 1,
    policyVersion: `v${i}`,
    reward: -0.5 + i * 0.1,
    success: i / 12,
    kl: 0.001 * i,
    entropy: 2 - i * 0.05,
    clipFraction: 0.1,
    gradNorm: 1 + (i % 3),
    outcome: { em: i / 12 },
    time: { tokensPerS: 900 + i },
  }));
  const evals = [4, 8, 12].map((step) => ({
    kind: 'eval',
    step,
    split: 'dev',
    reward: step / 20,
    success: step / 15,
    outcome: { em: step / 15 },
    summary: { byType: { add: { em: 0.5 } } },
  }));
  writeFileSync(join(runDir, 'metrics.jsonl'), [...metrics, ...evals].map((m) => JSON.stringify(m) + '\n').join(''));
  // A checkpoint folder whose model.json embeds the tokenizer, as src/policy/tfjs/checkpoint.ts saves it.
  mkdirSync(join(runDir, 'ckpt-step-12'));
  writeFileSync(join(runDir, 'ckpt-step-12', 'model.json'), JSON.stringify({ tokenizer: tokenizer.toJSON() }));
  secondDir = mkdtempSync(join(tmpdir(), 'viewer-run2-'));
  writeFileSync(
    join(secondDir, 'metrics.jsonl'),
    metrics.map((m) => JSON.stringify({ ...m, reward: m.reward + 0.3 }) + '\n').join(''),
  );
  viewer = await startViewer({ dirs: [runDir, secondDir], scenarios: builtinScenarios });
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({ executablePath: await chromiumExecutable(), args: CHROMIUM_ARGS });
});

test.after.always(async () => {
  await browser?.close();
  await viewer?.close();
  for (const dir of [runDir, secondDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A fresh page that records every request and every dialog, and fails on any page error. */
async function openPage(t: {
  fail: (m: string) => void;
}): Promise<{ page: Page; requests: string[]; dialogs: string[] }> {
  if (!browser) throw new Error('chromium did not start (see the before hook)');
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const requests: string[] = [];
  const dialogs: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  page.on('pageerror', (e) => t.fail(`page error: ${e.message}`));
  return { page, requests, dialogs };
}

/**
 * Saves a screenshot to test-artifacts/ for a person to look at; it asserts nothing. Headless Chromium's
 * software compositor can refuse a full-page capture when the machine is busy (CI runs the slow suite
 * beside training checks), so that falls back to the viewport, and a refused capture is logged.
 */
async function keepScreenshot(t: { log: (...v: unknown[]) => void }, page: Page, name: string, fullPage = true) {
  const path = join(ARTIFACTS, name);
  try {
    await page.screenshot({ path, fullPage });
  } catch (error) {
    t.log(`${name}: ${fullPage ? 'full-page ' : ''}screenshot refused (${(error as Error).message.split('\n')[0]})`);
    if (fullPage) await keepScreenshot(t, page, name, false);
  }
}

test.serial(
  'run page → episode page: turns, calls, results and rewards equal the record; the diagram marks the path',
  async (t) => {
    t.timeout(60_000);
    const { page, requests } = await openPage(t);
    await page.goto(`${viewer.url}/run/0`);
    t.is(await page.locator('table.episodes tbody tr').count(), records.length);
    t.true((await page.locator('figure.chart svg').count()) >= 8, 'a chart per metric + the reward histogram');
    t.deepEqual(
      await page.locator('figure.chart[data-field]').evaluateAll((els) => els.map((e) => e.getAttribute('data-field'))),
      [
        'reward',
        'success',
        'outcome.em',
        'kl',
        'entropy',
        'clipFraction',
        'gradNorm',
        'time.tokensPerS',
        'eval(dev).reward',
        'eval(dev).success',
        'eval(dev).outcome.em',
      ],
    );
    t.is(await page.locator('section.training-evals tr').count(), 1 + 3 + 2);
    t.regex(await page.locator('section.eval').innerText(), /0\.620[\s\S]*divide/);

    // Pick a random-policy episode with a tool call, a failed call and several turns.
    const target = records.findIndex(
      (r) =>
        r.turns.length > 1 &&
        r.turns.some((x) => x.results.some((res) => !res.ok)) &&
        r.turns.some((x) => x.results.some((res) => res.ok)),
    );
    t.true(target >= 0);
    const record = records[target]!;
    await Promise.all([
      page.waitForURL(`**/run/0/episode/${target}`),
      page.locator(`tr[data-ordinal="${target}"] a.episode-link`).click(),
    ]);
    t.is(
      await page
        .locator('.episode-id')
        .innerText()
        .then((s) => s.split(' ')[0]),
      record.episodeId,
    );

    const turns = page.locator('section.turn');
    t.is(await turns.count(), record.turns.length);
    for (const turn of record.turns) {
      const el = turns.nth(turn.index);
      t.is(await el.locator('pre.generated').textContent(), turn.text);
      // === so that a recorded -0 equals the page's 0.
      t.true(Number(await el.locator('.turn-reward').getAttribute('data-value')) === turn.reward);
      if (turn.action.kind === 'tool_calls') {
        t.deepEqual(
          await el.locator('.call-name').allTextContents(),
          turn.action.calls.map((c) => c.name),
        );
        t.deepEqual(
          (await el.locator('.call-args').allTextContents()).map((s) => JSON.parse(s)),
          turn.action.calls.map((c) => c.arguments),
        );
      }
      t.deepEqual(
        await el.locator('pre.result-content').allTextContents(),
        turn.results.map((r) => r.content),
      );
      if (turn.observation === null) t.is(await el.locator('.observation').getAttribute('data-null'), 'true');
      else t.is(await el.locator('pre.observation').textContent(), turn.observation);
    }
    t.true(Number(await page.locator('.total-reward').getAttribute('data-value')) === record.totalReward);
    t.true(Number(await page.locator('.outcome-reward').getAttribute('data-value')) === record.outcome.reward);
    t.is(await page.locator('.end-reason').innerText(), record.endReason);
    t.is(await page.locator('.replay').getAttribute('data-verified'), 'true');

    const visits = await page
      .locator('figure.episode-machine g.node')
      .evaluateAll((els) =>
        Object.fromEntries(els.map((e) => [e.getAttribute('data-state'), Number(e.getAttribute('data-visits'))])),
      );
    const expected: Record<string, number> = {
      generate: 0,
      execute: 0,
      respond: 0,
      transition: 0,
      context: 0,
      outcome: 0,
      done: 0,
    };
    for (const s of record.turns.flatMap((x) => x.states)) if (Object.hasOwn(expected, s)) expected[s]! += 1;
    t.deepEqual(visits, expected);
    t.is(await page.locator('figure.episode-machine g.node.visited[data-state="execute"]').count(), 1);
    t.true(
      (await page
        .locator('figure.episode-machine g.edge.taken[data-from="transition"][data-to="generate"]')
        .count()) === 1,
    );
    await keepScreenshot(t, page, 'viewer-episode.png');
    await keepScreenshot(t, page, 'viewer-episode-top.png', false);
    t.true(
      requests.every((u) => u.startsWith(viewer.url)),
      `only the viewer was asked: ${requests.join(', ')}`,
    );
    await page.context().close();
  },
);

test.serial('hostile markup in generated text and tool results is shown as text and runs nothing', async (t) => {
  t.timeout(60_000);
  const { page, dialogs, requests } = await openPage(t);
  const n = records.findIndex((r) => r.policy.id === 'hostile');
  const record = records[n]!;
  await page.goto(`${viewer.url}/run/0/episode/${n}`);
  const first = page.locator('section.turn').nth(0);
  t.is(await first.locator('pre.generated').textContent(), record.turns[0]!.text);
  t.true((await first.locator('pre.generated').textContent())!.includes(XSS_CALL));
  t.deepEqual(JSON.parse((await first.locator('.call-args').textContent())!), { expression: XSS_CALL });
  t.true((await first.locator('pre.result-content').textContent())!.length > 0);
  t.is(await page.locator('.final-answer').textContent(), XSS_ANSWER);
  // The answer's tokens, decoded with the checkpoint's tokenizer, spell the text; each shows its log-prob.
  const answerTurn = record.turns[1]!;
  const toks = page.locator('section.turn').nth(1).locator('.tokens .tok');
  t.is(await toks.count(), answerTurn.tokens!.length);
  t.is((await toks.allTextContents()).join(''), answerTurn.text);
  t.regex((await toks.nth(1).getAttribute('title'))!, /logprob -0\.4000/);
  await keepScreenshot(t, page, 'viewer-episode-hostile.png');
  // Nothing from the record became an element, ran, or fetched anything.
  t.is(await page.locator('script').count(), 0);
  t.is(await page.locator('main img').count(), 0);
  t.is(await page.locator('main b:text("bold?")').count(), 0);
  t.is(await page.evaluate(() => (window as unknown as { __pwned?: string }).__pwned), undefined);
  t.deepEqual(dialogs, []);
  t.true(
    requests.every((u) => u.startsWith(viewer.url)),
    requests.join(', '),
  );
  // The episodes table and the search echo the markup back as text as well.
  await page.goto(`${viewer.url}/run/0?q=${encodeURIComponent('<script>')}`);
  t.deepEqual(
    await page
      .locator('table.episodes tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-episode'))),
    [record.episodeId],
  );
  t.is(await page.locator('input[name=q]').inputValue(), '<script>');
  t.is(await page.evaluate(() => (window as unknown as { __pwned?: string }).__pwned), undefined);
  await page.context().close();
});

test.serial('filters and search return the right episodes; the group page shows GRPO advantages', async (t) => {
  t.timeout(60_000);
  const { page } = await openPage(t);
  await page.goto(`${viewer.url}/run/0`);
  await page.selectOption('select[name=endReason]', 'answered');
  await page.fill('input[name=minReward]', '0.5');
  await Promise.all([page.waitForURL(/endReason=answered/), page.click('form.filters button')]);
  const shown = await page
    .locator('table.episodes tbody tr')
    .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-episode')));
  t.deepEqual(
    shown,
    records.filter((r) => r.endReason === 'answered' && r.totalReward >= 0.5).map((r) => r.episodeId),
  );
  t.true(shown.length > 0);

  await page.goto(`${viewer.url}/run/0?policy=calculator-random-1&success=no&maxReward=-0.3`);
  t.deepEqual(
    await page
      .locator('table.episodes tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-episode'))),
    records
      .filter((r) => r.policy.version === 'calculator-random-1' && !r.outcome.success && r.totalReward <= -0.3)
      .map((r) => r.episodeId),
  );

  const word = 'ABACUS';
  await page.goto(`${viewer.url}/run/0`);
  await page.fill('input[name=q]', word);
  await Promise.all([page.waitForURL(/q=ABACUS/), page.press('input[name=q]', 'Enter')]);
  t.deepEqual(
    await page
      .locator('table.episodes tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-episode'))),
    records.filter((r) => r.turns.some((x) => x.text.toLowerCase().includes('abacus'))).map((r) => r.episodeId),
  );

  // GRPO group of the first task: G = 4 side by side, advantages as the trainer computes them.
  const members = records.filter(
    (r) => r.group === records[0]!.group && r.policy.version === records[0]!.policy.version,
  );
  await page.goto(`${viewer.url}/run/0`);
  await page.locator('table.episodes tbody tr').first().locator('td a').last().click();
  await page.waitForURL(/\/group\?/);
  const cards = await page.locator('.compare .member').evaluateAll((els) =>
    els.map((e) => ({
      reward: Number(e.getAttribute('data-reward')),
      advantage: Number(e.getAttribute('data-advantage')),
    })),
  );
  t.is(cards.length, 4);
  t.deepEqual(
    cards,
    members.map((r, i) => ({ reward: r.totalReward, advantage: groupAdvantages(members)[i]!.advantage })),
  );
  await keepScreenshot(t, page, 'viewer-group.png');

  // Two runs: the overview overlays their curves (one colour per run).
  await page.goto(`${viewer.url}/`);
  t.deepEqual(await page.locator('table.runs tr td:nth-child(3)').allTextContents(), [String(records.length), '0']);
  t.regex(await page.locator('figure.chart[data-field="reward"]').innerText(), /viewer-run-[\s\S]*viewer-run2-/);
  await page.context().close();
});

test.serial(
  'the report opens from file:// with its charts, tables and examples, and asks the network for nothing',
  async (t) => {
    t.timeout(60_000);
    const file = join(runDir, 'report.html');
    writeFileSync(file, await buildReport(runDir, { scenarios: builtinScenarios }));
    const { page, requests } = await openPage(t);
    await page.route('**/*', (route) =>
      route.request().url().startsWith('file://') ? route.continue() : route.abort(),
    );
    await page.goto(pathToFileURL(file).href);
    t.true((await page.locator('figure.chart svg').count()) >= 8);
    t.true((await page.locator('figure.chart svg path').count()) > 8, 'the curves have drawn marks');
    t.is(await page.locator('section.example').count(), 3);
    t.is(await page.locator('section.example figure.episode-machine svg').count(), 3);
    t.is(await page.locator('script').count(), 0);
    t.deepEqual(requests, [pathToFileURL(file).href]);
    await keepScreenshot(t, page, 'report.png');
    await page.context().close();
  },
);
