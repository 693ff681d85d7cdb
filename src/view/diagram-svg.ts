import { escapeHtml, trusted, type Html } from './html.ts';
import { layerNodes, type MachineGraph } from './machine-graph.ts';

export interface DiagramMarks {
  /** Visits per node id (0 or absent: not visited). */
  visits?: ReadonlyMap<string, number>;
  /** Edges taken, as `from\u0000to`. */
  edges?: ReadonlySet<string>;
}

const NODE_W = 124;
const NODE_H = 32;
/** Vertical distance between layers, horizontal distance between states of one layer. */
const LAYER_GAP = 64;
const SIDE_GAP = 70;

interface Box {
  x: number;
  y: number;
  layer: number;
}

/**
 * A state machine as inline SVG: states in rows by their distance from the initial state (top to
 * bottom), forward jumps arched on the right, back edges (loops) arched on the left; visited
 * states filled and counted, taken transitions drawn thick. All text is escaped; the SVG needs no
 * script and no network.
 */
export function renderDiagram(graph: MachineGraph, marks: DiagramMarks = {}, title?: string): Html {
  const layers = layerNodes(graph);
  const spans = graph.edges.map((e) => Math.abs(layers.get(e.to)! - layers.get(e.from)!));
  const maxSpan = Math.max(1, ...spans);
  // Room for the widest back arc (its apex sits `reach` beyond the states) and the longest label beside one.
  const back = graph.edges.filter((e) => e.from !== e.to && layers.get(e.to)! <= layers.get(e.from)!);
  const backSpans = back.map((e) => layers.get(e.from)! - layers.get(e.to)!);
  const left = back.length ? 26 + 18 * Math.max(1, ...backSpans) + Math.max(...back.map(labelWidth)) : 24;
  // Parallel regions get column blocks of their own, as wide as their widest layer.
  const regions = [...new Set(graph.nodes.map((n) => n.region ?? ''))];
  const slots = new Map<string, number>();
  const widths = new Map<string, number>();
  const slotOf = new Map<string, number>();
  for (const n of graph.nodes) {
    const key = `${n.region ?? ''}\u0000${layers.get(n.id)}`;
    const slot = slots.get(key) ?? 0;
    slots.set(key, slot + 1);
    slotOf.set(n.id, slot);
    widths.set(n.region ?? '', Math.max(widths.get(n.region ?? '') ?? 0, slot + 1));
  }
  const blockStart = new Map<string, number>();
  let column = 0;
  for (const r of regions) {
    blockStart.set(r, column);
    column += widths.get(r)!;
  }
  const box = new Map<string, Box>();
  for (const n of graph.nodes) {
    const layer = layers.get(n.id)!;
    const col = blockStart.get(n.region ?? '')! + slotOf.get(n.id)!;
    box.set(n.id, { x: left + col * (NODE_W + SIDE_GAP), y: 22 + layer * LAYER_GAP, layer });
  }
  const right = Math.max(0, ...[...box.values()].map((b) => b.x)) + NODE_W;
  // Forward arcs and their labels go right of the states, as do the labels of straight edges.
  const width = Math.max(...graph.edges.map((e) => labelWidth(e) + 40), 150) + right + 26 + 18 * maxSpan;
  const height = Math.max(0, ...[...box.values()].map((b) => b.y)) + NODE_H + 24;
  const parts: string[] = [];
  for (const e of graph.edges) {
    const a = box.get(e.from)!;
    const b = box.get(e.to)!;
    const taken = marks.edges?.has(`${e.from}\u0000${e.to}`) ?? false;
    const span = b.layer - a.layer;
    let d: string;
    let lx: number;
    let ly: number;
    let anchor = 'start';
    if (e.from === e.to) {
      const x = a.x + NODE_W;
      d = `M${x} ${a.y + 8} C${x + 34} ${a.y - 6} ${x + 34} ${a.y + NODE_H + 6} ${x + 2} ${a.y + NODE_H - 8}`;
      lx = x + 30;
      ly = a.y + NODE_H / 2 + 3;
    } else if (span === 1) {
      const [x1, y1, x2, y2] = [a.x + NODE_W / 2, a.y + NODE_H, b.x + NODE_W / 2, b.y];
      d = `M${x1} ${y1} L${x2} ${y2 - 1}`;
      lx = (x1 + x2) / 2 + 6;
      ly = (y1 + y2) / 2 + 3;
    } else {
      const forward = span > 1;
      const x1 = forward ? a.x + NODE_W : a.x;
      const x2 = forward ? b.x + NODE_W : b.x;
      const y1 = a.y + NODE_H / 2 + (forward ? 4 : -4);
      const y2 = b.y + NODE_H / 2 + (forward ? -4 : 4);
      const reach = 26 + 18 * Math.max(1, Math.abs(span));
      const cx = forward ? Math.max(x1, x2) + reach * 2 : Math.min(x1, x2) - reach * 2;
      const cy = (y1 + y2) / 2;
      d = `M${x1} ${y1} Q${cx} ${cy} ${x2 + (forward ? 1 : -1)} ${y2}`;
      lx = 0.25 * x1 + 0.5 * cx + 0.25 * x2 + (forward ? 4 : -4);
      ly = cy + 3;
      anchor = forward ? 'start' : 'end';
    }
    const cls = taken ? 'edge taken' : 'edge';
    parts.push(
      `<g class="${cls}" data-from="${escapeHtml(e.from)}" data-to="${escapeHtml(e.to)}"><path d="${d}" fill="none" stroke="${taken ? '#1d6fd6' : '#9aa4b1'}" stroke-width="${taken ? 2.2 : 1.1}" marker-end="url(#arrow${taken ? '-taken' : ''})"/>` +
        `<text x="${lx}" y="${ly}" text-anchor="${anchor}" font-size="10" fill="${taken ? '#1d4f91' : '#6b7480'}">${escapeHtml(labelText(e))}</text></g>`,
    );
  }
  for (const n of graph.nodes) {
    const b = box.get(n.id)!;
    const count = marks.visits?.get(n.id) ?? 0;
    const on = count > 0;
    const initial = n.id === graph.initial;
    parts.push(
      `<g class="node${on ? ' visited' : ''}" data-state="${escapeHtml(n.id)}" data-visits="${count}">` +
        `<rect x="${b.x}" y="${b.y}" width="${NODE_W}" height="${NODE_H}" rx="${n.final ? 16 : 7}" fill="${on ? '#d7e8ff' : '#ffffff'}" stroke="${on ? '#1d6fd6' : '#9aa4b1'}" stroke-width="${on ? 2 : 1.1}"/>` +
        (n.final
          ? `<rect x="${b.x + 3}" y="${b.y + 3}" width="${NODE_W - 6}" height="${NODE_H - 6}" rx="13" fill="none" stroke="${on ? '#1d6fd6' : '#9aa4b1'}"/>`
          : '') +
        `<text x="${b.x + NODE_W / 2}" y="${b.y + NODE_H / 2 + 4}" text-anchor="middle" font-size="12" font-weight="${on ? 600 : 400}" fill="#1b2430">${escapeHtml(n.key)}</text>` +
        (on ? `<text x="${b.x + 5}" y="${b.y - 3}" font-size="10" fill="#1d6fd6">×${count}</text>` : '') +
        (initial
          ? `<path d="M${b.x + NODE_W / 2} ${b.y - 16} L${b.x + NODE_W / 2} ${b.y - 1}" stroke="#1b2430" marker-end="url(#arrow-start)"/><circle cx="${b.x + NODE_W / 2}" cy="${b.y - 18}" r="4" fill="#1b2430"/>`
          : '') +
        `</g>`,
    );
  }
  const label = escapeHtml(title ?? `state machine ${graph.id}`);
  return trusted(
    `<svg class="diagram" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="${label}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif">` +
      `<defs>${marker('arrow', '#9aa4b1')}${marker('arrow-taken', '#1d6fd6')}${marker('arrow-start', '#1b2430')}</defs>${parts.join('')}</svg>`,
  );
}

/** An edge's labels as drawn beside it. */
function labelText(edge: { labels: string[] }): string {
  return edge.labels.join(' | ');
}

/** A label's width in pixels at the 10 px font, roughly (an average glyph of system-ui). */
function labelWidth(edge: { labels: string[] }): number {
  return Math.ceil(labelText(edge).length * 5.8);
}

function marker(id: string, color: string): string {
  return `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="${color}"/></marker>`;
}

/**
 * What an episode's path marks on the episode machine: visits per state and the transitions
 * between consecutive states (turn.states, concatenated over the turns). States are matched by
 * id (path) or by key, so a record holding either finds its node; a name with no node (the episode
 * machine's stages that are actions: parseToolCall, reward) is passed over, so the transition
 * between the states around it is the one marked.
 */
export function pathMarks(graph: MachineGraph, path: readonly string[]): DiagramMarks {
  const byKey = new Map<string, string>();
  for (const n of graph.nodes) {
    byKey.set(n.id, n.id);
    if (!byKey.has(n.key)) byKey.set(n.key, n.id);
  }
  const visits = new Map<string, number>();
  const edges = new Set<string>();
  let prev: string | undefined;
  for (const state of path) {
    const id = byKey.get(state);
    if (!id) continue;
    visits.set(id, (visits.get(id) ?? 0) + 1);
    if (prev !== undefined) edges.add(`${prev}\u0000${id}`);
    prev = id;
  }
  return { visits, edges };
}
