import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { episodeMachine } from '../../machines/episode.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { boundedServer, type ConnectionLimits } from '../core/http.ts';
import { CorruptRecordError } from '../core/errors.ts';
import type { EpisodeRecord } from '../core/types.ts';
import { replayRecord, type ReplayResult } from '../replay/replay.ts';
import { isAgentRecord } from '../record/agent.ts';
import { agentVerdict } from '../gateway/replay-agent.ts';
import { loadRecordScenario, type ScenarioRegistry } from '../scenario/load.ts';
import type { Scenario } from '../scenario/scenario.ts';
import { groupAdvantages } from './advantages.ts';
import { chartLibraries, metricCharts, rewardHistogram, runSeries, type Chart } from './charts.ts';
import { EpisodeIndex } from './episode-index.ts';
import { RunDirError, ViewerStartError, ViewRequestError } from './errors.ts';
import { fmtNumber, html, type Html } from './html.ts';
import { machineGraph, type MachineGraph } from './machine-graph.ts';
import { episodeView } from './pages/episode.ts';
import { groupView } from './pages/group.ts';
import { page, queryString } from './pages/layout.ts';
import { episodesTable, parseEpisodeQuery, queryEpisodes, runSections, PAGE_SIZE } from './pages/run.ts';
import { readRunDir, runNames, type RunInfo } from './run-dir.ts';
import { loadTokenDecoder, type TokenDecoder } from './tokens.ts';

export interface ViewerOptions {
  dirs: readonly string[];
  /** Default 127.0.0.1: the viewer serves local files and is not meant to face a network. */
  host?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Connections at once and request deadlines (default DEFAULT_CONNECTION_LIMITS). */
  limits?: ConnectionLimits;
  /** The scenarios records may name, to replay episodes and draw world machines (the CLI: the built-in ones). */
  scenarios?: ScenarioRegistry;
  /**
   * The scenario folders (or built-in names) the user trusts: a record's scenario is loaded from one
   * of these or the registry, never from the folder the record names unless it is one of these.
   */
  scenario?: string | readonly string[];
}

export interface Viewer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

interface Run {
  dir: string;
  name: string;
  index: EpisodeIndex | undefined;
  decoder: Promise<{ decode?: TokenDecoder; warning?: string }> | undefined;
  decoderPath: string | undefined;
  /** Its episodes.jsonl was there and has been deleted. */
  lost?: boolean;
}

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

const SECURITY_HEADERS = {
  // No script anywhere, no external resource: even markup that slipped through could not run.
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/**
 * The episode viewer: a read-only HTTP app over one or more run directories. Pages are rendered on
 * the server with every record string escaped, and carry no script.
 */
export class ViewerApp {
  readonly runs: Run[];
  private readonly scenarios = new Map<string, Promise<Scenario | Error>>();
  private readonly chartCache = new Map<string, Promise<unknown>>();
  readonly episodeGraph: MachineGraph = machineGraph(episodeMachine);

  constructor(
    dirs: readonly string[],
    private readonly registry: ScenarioRegistry = {},
    /** The scenario folders (or names) the user named: the only folders whose code runs here. */
    private readonly trusted: string | readonly string[] = [],
  ) {
    if (dirs.length === 0) throw new ViewRequestError('give at least one run directory');
    const names = runNames(dirs);
    this.runs = dirs.map((dir, i) => {
      const info = readRunDir(dir, names[i]);
      return {
        dir: info.dir,
        name: info.name,
        index: info.episodesPath ? EpisodeIndex.open(info.episodesPath) : undefined,
        decoder: undefined,
        decoderPath: undefined,
      };
    });
  }

  /** Re-reads what may have changed since the last request (a trainer may still be writing). */
  private info(run: Run): RunInfo {
    const info = readRunDir(run.dir, run.name);
    if (!run.index && info.episodesPath) run.index = EpisodeIndex.open(info.episodesPath);
    run.index?.refresh();
    // Deleted while the viewer runs: the pages say so (the index comes back if the file does).
    if (run.index?.gone) {
      run.index = undefined;
      run.lost = true;
    } else if (run.index) run.lost = false;
    if (info.tokenizerPath !== run.decoderPath) {
      run.decoderPath = info.tokenizerPath;
      run.decoder = loadTokenDecoder(info.tokenizerPath);
    }
    return info;
  }

  private run(param: string): { run: Run; r: number } {
    const r = ordinal(param);
    const run = r === undefined ? undefined : this.runs[r];
    if (!run) throw new ViewRequestError(`no run ${param} (there are ${this.runs.length})`, 404);
    return { run, r: r! };
  }

  /** Charts are rendered once per state of their inputs (a metrics file's size and time, a run's episode count). */
  private cached<T>(key: string, make: () => Promise<T>): Promise<T> {
    let value = this.chartCache.get(key) as Promise<T> | undefined;
    if (!value) {
      value = make();
      this.chartCache.set(key, value);
      if (this.chartCache.size > 64) this.chartCache.delete(this.chartCache.keys().next().value!);
    }
    return value;
  }

  private charts(runs: { run: Run; info: RunInfo }[]): Promise<Chart[]> {
    const key = 'metrics|' + runs.map(({ run }) => `${run.dir}:${fileStamp(join(run.dir, 'metrics.jsonl'))}`).join('|');
    return this.cached(key, () => metricCharts(runs.flatMap(({ info }) => runSeries(info))));
  }

  private histogram(runs: Run[]): Promise<Html> {
    const key = 'hist|' + runs.map((run) => `${run.dir}:${run.index!.size}`).join('|');
    return this.cached(key, () =>
      rewardHistogram(runs.map((run) => ({ run: run.name, rewards: run.index!.episodes.map((e) => e.totalReward) }))),
    );
  }

  private scenarioFor(record: EpisodeRecord): Promise<Scenario | Error> {
    const key = canonicalJson(record.scenario);
    let s = this.scenarios.get(key);
    if (!s) {
      s = loadRecordScenario(record.scenario, this.registry, this.trusted).catch((err: unknown) =>
        err instanceof Error ? err : new Error(String(err)),
      );
      this.scenarios.set(key, s);
    }
    return s;
  }

  private nav(r?: number): Html {
    return html`<a href="/">runs</a>${this.runs.map((run, i) => html`<a href="/run/${i}"${i === r ? ' aria-current="page"' : ''}>${run.name}</a>`)}`;
  }

  /** Answers one GET: a page (HTML) or the JSON API. */
  async handle(
    pathname: string,
    params: URLSearchParams,
  ): Promise<{ status: number; type: string; body: string; location?: string }> {
    const parts = pathname
      .split('/')
      .filter(Boolean)
      .map((p) => decodeURIComponent(p));
    const htmlPage = (title: string, body: Html, r?: number) => ({
      status: 200,
      type: 'text/html; charset=utf-8',
      body: page(title, body, this.nav(r)),
    });
    const json = (value: unknown) => ({
      status: 200,
      type: 'application/json; charset=utf-8',
      body: JSON.stringify(value),
    });

    if (parts.length === 0) {
      if (this.runs.length === 1) return { status: 302, type: 'text/plain', body: '', location: '/run/0' };
      return htmlPage('runs', await this.overview());
    }
    if (parts[0] === 'run' && parts.length >= 2) {
      const { run, r } = this.run(parts[1]!);
      const info = this.info(run);
      if (parts.length === 2) return htmlPage(run.name, await this.runPage(run, r, info, params), r);
      if (parts[2] === 'episode' && parts.length === 4) {
        const { title, body } = await this.episodePage(run, r, parts[3]!);
        return htmlPage(title, body, r);
      }
      if (parts[2] === 'group' && parts.length === 3)
        return htmlPage(`group ${params.get('key') ?? ''}`, await this.groupPage(run, r, params), r);
    }
    if (parts[0] === 'api' && parts[1] === 'run' && parts.length >= 4) {
      const { run } = this.run(parts[2]!);
      this.info(run);
      const index = this.requireIndex(run);
      if (parts[3] === 'episodes' && parts.length === 4) {
        const query = parseEpisodeQuery(params);
        const { rows, total, ms } = queryEpisodes(index, query);
        return json({ total, page: query.page, pageSize: PAGE_SIZE, ms, rows });
      }
      if (parts[3] === 'episode' && parts.length === 5) return json(this.readEpisode(index, parts[4]!));
    }
    throw new ViewRequestError(`no page at ${pathname}`, 404);
  }

  private requireIndex(run: Run): EpisodeIndex {
    if (!run.index)
      throw new ViewRequestError(`run ${run.name} has no episodes.jsonl${run.lost ? ' (it was deleted)' : ''}`, 404);
    return run.index;
  }

  private readEpisode(index: EpisodeIndex, param: string): EpisodeRecord {
    const n = ordinal(param);
    if (n === undefined || n >= index.size)
      throw new ViewRequestError(`no episode ${param} (the run has ${index.size})`, 404);
    const record = index.tryRead(n);
    if (record instanceof CorruptRecordError)
      throw new ViewRequestError(`episode ${param} is corrupt: ${record.message}`, 404);
    return record;
  }

  private async overview(): Promise<Html> {
    const runs = this.runs.map((run) => ({ run, info: this.info(run) }));
    const charts = await this.charts(runs);
    const withEpisodes = runs.filter(({ run }) => run.index && run.index.size > 0);
    const hist = withEpisodes.length ? await this.histogram(withEpisodes.map(({ run }) => run)) : undefined;
    return html`<h1>${runs.length} runs</h1>
    <section class="card"><table class="runs"><tr><th>run</th><th>directory</th><th class="num">episodes</th><th class="num">success rate</th><th class="num">mean reward</th><th class="num">metric steps</th><th class="num">evals</th></tr>
    ${runs.map(({ run, info }, i) => {
      const es = run.index?.episodes ?? [];
      const mean = (f: (e: (typeof es)[number]) => number) =>
        es.length ? fmtNumber(es.reduce((a, e) => a + f(e), 0) / es.length) : '–';
      return html`<tr><td><a href="/run/${i}">${run.name}</a></td><td><code>${run.dir}</code></td><td class="num">${es.length}</td><td class="num">${mean((e) => (e.success ? 1 : 0))}</td><td class="num">${mean((e) => e.totalReward)}</td><td class="num">${info.metrics.length}</td><td class="num">${info.trainingEvals.length + info.evals.length}</td></tr>`;
    })}</table></section>
    <section class="card"><h2>Curves, runs overlaid</h2><div class="charts">${charts.map((c) => html`<figure class="chart" data-field="${c.field}">${c.svg}</figure>`)}${hist ? html`<figure class="chart">${hist}</figure>` : ''}</div></section>`;
  }

  private async runPage(run: Run, r: number, info: RunInfo, params: URLSearchParams): Promise<Html> {
    const charts = await this.charts([{ run, info }]);
    const index = run.index;
    const hist = index && index.size > 0 ? [await this.histogram([run])] : [];
    let table: Html = html``;
    if (index) {
      const query = parseEpisodeQuery(params);
      const { rows, total, ms } = queryEpisodes(index, query);
      table = episodesTable({ base: `/run/${r}`, facets: index.facets(), query, rows, total, all: index.size, ms });
    }
    const lost = run.lost
      ? html`<div class="warn">episodes.jsonl was deleted while the viewer ran: no episodes to show</div>`
      : '';
    const corrupt = index?.corrupt.length
      ? html`<div class="warn">${index.corrupt.length} corrupt lines in episodes.jsonl (first: line ${index.corrupt[0]!.line}: ${index.corrupt[0]!.error})</div>`
      : '';
    return html`<h1>${run.name}</h1><div class="muted"><code>${run.dir}</code></div>${lost}${corrupt}${runSections(info, charts, hist)}${table}`;
  }

  private async episodePage(run: Run, r: number, param: string): Promise<{ title: string; body: Html }> {
    const index = this.requireIndex(run);
    const record = this.readEpisode(index, param);
    // An agent's episode (the gateway's) has no scenario to re-drive: its record is checked on its own.
    const scenario = isAgentRecord(record) ? null : await this.scenarioFor(record);
    let replay: ReplayResult | { error: string };
    if (scenario === null) replay = agentVerdict(record);
    else if (scenario instanceof Error)
      replay = { error: `scenario ${record.scenario.id} could not be loaded: ${scenario.message}` };
    else {
      try {
        replay = await replayRecord(record, scenario);
      } catch (err) {
        replay = { error: err instanceof Error ? err.message : String(err) };
      }
    }
    const worldGraph =
      scenario === null || scenario instanceof Error || !scenario.worldMachine
        ? undefined
        : machineGraph(scenario.worldMachine);
    const { decode, warning } = (await run.decoder) ?? {};
    const n = Number(param);
    const prevNext = html`<div class="pager">${n > 0 ? html`<a class="prev" href="/run/${r}/episode/${n - 1}">← previous episode</a>` : ''}<a href="/run/${r}">back to the run</a>${n + 1 < index.size ? html`<a class="next" href="/run/${r}/episode/${n + 1}">next episode →</a>` : ''}</div>`;
    const body = html`<h1>Episode ${record.episodeId}</h1>${prevNext}${warning ? html`<div class="warn">${warning}</div>` : ''}
      ${episodeView({ record, episodeGraph: this.episodeGraph, worldGraph, replay, decode, groupHref: `/run/${r}/group${queryString({ key: record.group, policy: record.policy.version })}` })}`;
    return { title: `episode ${record.episodeId}`, body };
  }

  private async groupPage(run: Run, r: number, params: URLSearchParams): Promise<Html> {
    const index = this.requireIndex(run);
    const key = params.get('key');
    if (!key) throw new ViewRequestError('the group page needs ?key=GROUP');
    const policy = params.get('policy') ?? index.episodes.find((e) => e.group === key)?.policyVersion ?? '';
    const members = index.groupMembers(key, policy);
    if (members.length === 0)
      throw new ViewRequestError(`no episodes in group ${key} with policy version ${policy}`, 404);
    const records = members.map((m) => this.readEpisode(index, String(m.ordinal)));
    const advantages = groupAdvantages(records);
    return html`<h1>GRPO group ${key}</h1><div class="muted">policy version ${policy}</div>
      ${groupView(records.map((record, i) => ({ record, ...advantages[i]!, href: `/run/${r}/episode/${members[i]!.ordinal}` })))}`;
  }
}

/** A list position as written in a URL: digits only, no sign, exponent, hex or blanks (so `1e0` is not 1). */
function ordinal(param: string): number | undefined {
  return /^(0|[1-9]\d{0,14})$/.test(param) ? Number(param) : undefined;
}

function fileStamp(path: string): string {
  try {
    const s = statSync(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return 'none';
  }
}

function errorPage(status: number, message: string): string {
  return page(
    `error ${status}`,
    html`<h1>Error ${status}</h1><pre class="error-message">${message}</pre>`,
    html`<a href="/">runs</a>`,
  );
}

/** Starts the viewer on host:port (127.0.0.1 and a free port by default). */
export async function startViewer(options: ViewerOptions): Promise<Viewer> {
  // Every run page draws charts: a chart library that is not installed is said now, not on a page.
  await chartLibraries();
  const app = new ViewerApp(options.dirs, options.scenarios, options.scenario);
  const host = options.host ?? '127.0.0.1';
  let port = 0;
  const server = boundedServer((req: IncomingMessage, res: ServerResponse) => {
    const send = (status: number, type: string, body: string, extra: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': type, ...SECURITY_HEADERS, ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return send(405, 'text/plain; charset=utf-8', 'read-only viewer: GET only\n', { allow: 'GET, HEAD' });
    // Bound to a loopback address, answer only requests addressed to it (no DNS rebinding).
    if (LOCAL_HOSTS.has(host)) {
      const requested = (req.headers.host ?? '').replace(/:\d+$/, '');
      if (!LOCAL_HOSTS.has(requested))
        return send(421, 'text/plain; charset=utf-8', `this viewer answers only on localhost, not "${requested}"\n`);
    }
    let url: URL;
    try {
      url = new URL(req.url ?? '/', `http://localhost:${port}`);
    } catch {
      return send(400, 'text/plain; charset=utf-8', 'bad URL\n');
    }
    app.handle(url.pathname, url.searchParams).then(
      (out) => send(out.status, out.type, out.body, out.location ? { location: out.location } : {}),
      (err: unknown) => {
        // A run directory emptied or removed while the viewer runs is a page that says so, not a 500.
        const status =
          err instanceof ViewRequestError
            ? err.status
            : err instanceof RunDirError
              ? 404
              : err instanceof URIError
                ? 400
                : 500;
        const message = err instanceof Error ? err.message : String(err);
        if (url.pathname.startsWith('/api/'))
          send(status, 'application/json; charset=utf-8', JSON.stringify({ error: message }));
        else send(status, 'text/html; charset=utf-8', errorPage(status, message));
      },
    );
  }, options.limits);
  const wanted = options.port ?? 0;
  if (!Number.isInteger(wanted) || wanted < 0 || wanted > 65535)
    throw new ViewerStartError(`port must be an integer 0–65535, got ${wanted}`);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? `port ${wanted} is in use (--port 0 picks a free one)`
          : err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND'
            ? `address ${host} is not available here`
            : err.message;
      reject(new ViewerStartError(`the viewer cannot listen on ${host}:${wanted}: ${why}`));
    });
    server.listen(wanted, host, () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}`,
    server,
    close: () => new Promise((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
}
