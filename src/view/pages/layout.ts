import { fmtNumber, html, trusted, type Html } from '../html.ts';

const CSS = `
:root { --fg:#1b2430; --muted:#667085; --line:#dde2e8; --accent:#1d6fd6; --bg:#f6f8fa; --good:#177245; --bad:#b42318; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header.top { background: #0f1b2d; color: #fff; padding: 10px 20px; display: flex; gap: 18px; align-items: baseline; }
header.top a { color: #cfe0ff; text-decoration: none; }
header.top .brand { font-weight: 700; color: #fff; }
main { padding: 16px 20px 40px; max-width: 1400px; }
h1 { font-size: 20px; margin: 4px 0 12px; } h2 { font-size: 16px; margin: 22px 0 8px; } h3 { font-size: 14px; margin: 12px 0 6px; }
a { color: var(--accent); }
section.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
table { border-collapse: collapse; background: #fff; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f0f3f7; font-weight: 600; font-size: 12.5px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: var(--muted); }
.ok { color: var(--good); font-weight: 600; } .fail { color: var(--bad); font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 10px; }
.charts figure { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; font: 12.5px/1.45 ui-monospace, "SFMono-Regular", Menlo, monospace; }
.turn { border-left: 4px solid var(--accent); }
.turn h3 { display: flex; gap: 12px; align-items: baseline; }
.path { font-size: 12px; color: var(--muted); }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; }
.kv > div:nth-child(odd) { color: var(--muted); }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; background: #eef2f6; }
.badge.error, .badge.invalid { background: #fde8e7; color: var(--bad); }
.badge.ok, .badge.verified { background: #e3f4ea; color: var(--good); }
form.filters { display: flex; flex-wrap: wrap; gap: 8px 12px; align-items: end; margin-bottom: 10px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
form.filters input, form.filters select { font: inherit; padding: 3px 5px; }
.pager { margin: 8px 0; display: flex; gap: 12px; align-items: center; }
.tokens { font: 12.5px/1.9 ui-monospace, Menlo, monospace; white-space: pre-wrap; word-break: break-word; }
.tokens .tok { border-radius: 2px; padding: 1px 0; margin-right: 1px; }
.tokens.ids .tok { font-size: 11px; }
.compare { display: grid; grid-template-columns: repeat(auto-fit, minmax(250px, 1fr)); gap: 10px; }
.compare .member { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px; }
.warn { background: #fff7e6; border: 1px solid #f5d48b; border-radius: 6px; padding: 6px 10px; margin: 8px 0; }
.episode-grid { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, max-content); gap: 16px; align-items: start; }
.episode-side { position: sticky; top: 8px; background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px; max-height: calc(100vh - 16px); overflow: auto; }
.episode-side figure { margin: 0 0 10px; }
.episode-side { max-width: 46vw; } .episode-side svg { max-width: 100%; height: auto; }
@media (max-width: 1000px) { .episode-grid { grid-template-columns: 1fr; } .episode-side { position: static; max-height: none; } }
details > summary { cursor: pointer; color: var(--muted); }
`;

/** A whole page: no script, no external resource (the CSS is inline). */
export function page(title: string, body: Html, nav: Html = html``): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title><style>${trusted(CSS)}</style></head>
<body><header class="top"><span class="brand">agent-r1</span>${nav}</header><main>${body}</main></body></html>`.value;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function cell(v: unknown): Html {
  if (typeof v === 'number') return html`<td class="num">${fmtNumber(v)}</td>`;
  if (typeof v === 'string' || typeof v === 'boolean') return html`<td>${String(v)}</td>`;
  if (v === null || v === undefined) return html`<td class="muted">–</td>`;
  return html`<td><code>${JSON.stringify(v)}</code></td>`;
}

/**
 * A JSON object as tables: scalars as key/value rows, and each nested object of objects (per-type
 * results, per-split evals) as its own table with one row per key.
 */
export function valueTables(value: Record<string, unknown>, caption?: string): Html {
  const scalars: [string, unknown][] = [];
  const nested: [string, Record<string, Record<string, unknown>>][] = [];
  const objects: [string, Record<string, unknown>][] = [];
  for (const [k, v] of Object.entries(value)) {
    if (isPlainObject(v) && Object.keys(v).length > 0 && Object.values(v).every(isPlainObject))
      nested.push([k, v as Record<string, Record<string, unknown>>]);
    else if (isPlainObject(v) && Object.values(v).every((x) => !isPlainObject(x))) objects.push([k, v]);
    else scalars.push([k, v]);
  }
  const tables: Html[] = [];
  if (scalars.length || objects.length) {
    const rows = [
      ...scalars.map(([k, v]) => html`<tr><th>${k}</th>${cell(v)}</tr>`),
      ...objects.map(
        ([k, v]) =>
          html`<tr><th>${k}</th><td>${Object.entries(v).map(([a, b]) => html`<span class="badge">${a}: ${typeof b === 'number' ? fmtNumber(b) : String(b)}</span> `)}</td></tr>`,
      ),
    ];
    tables.push(html`<table class="values">${caption ? html`<caption>${caption}</caption>` : ''}${rows}</table>`);
  }
  for (const [k, rowsObj] of nested) {
    const columns = [...new Set(Object.values(rowsObj).flatMap((r) => Object.keys(r)))];
    tables.push(html`<h3>${k}</h3><table class="values"><tr><th></th>${columns.map((c) => html`<th class="num">${c}</th>`)}</tr>
      ${Object.entries(rowsObj).map(([name, r]) => html`<tr><th>${name}</th>${columns.map((c) => cell(r[c]))}</tr>`)}</table>`);
  }
  return html`${tables}`;
}

/** A query string from the non-empty entries. */
export function queryString(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
