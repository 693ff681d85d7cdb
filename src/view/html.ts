/**
 * Safe-by-construction HTML: every value interpolated into an `html` template is escaped unless it
 * is itself an `Html` fragment made by this module. Record text (model output, tool results) can
 * therefore only ever reach a page as text.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for an element body or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[];

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof Html) return part.value;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

/** A template tag: literal parts are trusted markup, interpolations are escaped. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new Html(out);
}

/**
 * Marks markup produced by trusted code (SVG from the chart library or the diagram renderer, which
 * escape their own text) as safe. Never call it on record text.
 */
export function trusted(markup: string): Html {
  return new Html(markup);
}

/** A compact number for tables: integers as is, others to 3 significant decimals. */
export function fmtNumber(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 1000 || Math.abs(v) < 0.001 ? v.toPrecision(4) : v.toFixed(3);
}
