import type { AnyStateMachine, AnyStateNode } from 'xstate';

/**
 * Draws an XState v5 machine as a Mermaid `stateDiagram-v2`, read from the machine's own state
 * nodes (never drawn by hand), so the docs and the viewer always show the machine that runs.
 *
 * - compound states become `state X { … }` blocks with their initial state marked `[*] --> …`;
 * - parallel regions are separated by `--`;
 * - final states get `X --> [*]`;
 * - each transition is labelled with its event (`done(actor)` / `error(actor)` for invoked actors,
 *   `always` for eventless ones), its guard in brackets and its named
 *   actions after a slash; targetless transitions are self-loops.
 */
export function machineToMermaid(machine: AnyStateMachine): string {
  const lines = ['stateDiagram-v2'];
  const root = machine.root;
  const transitionsByBlock = new Map<AnyStateNode, string[]>();
  for (const node of allNodes(root)) {
    for (const edge of edgesOf(node)) {
      const block = lowestCompoundAncestor(edge.from, edge.to, root);
      const list = transitionsByBlock.get(block) ?? [];
      list.push(`${nodeId(edge.from)} --> ${nodeId(edge.to)}${edge.label ? ` : ${edge.label}` : ''}`);
      transitionsByBlock.set(block, list);
    }
  }
  if (root.type === 'parallel') {
    // Mermaid draws concurrent regions only inside a composite state: wrap them in the machine.
    lines.push(`  state ${machine.id.replace(/[^A-Za-z0-9_]/g, '_')} {`);
    emitChildren(root, '    ', lines, transitionsByBlock);
    lines.push('  }');
  } else {
    emitChildren(root, '  ', lines, transitionsByBlock);
  }
  return lines.join('\n') + '\n';
}

interface Edge {
  from: AnyStateNode;
  to: AnyStateNode;
  label: string;
}

function emitChildren(node: AnyStateNode, indent: string, lines: string[], edges: Map<AnyStateNode, string[]>): void {
  const children = Object.values(node.states) as AnyStateNode[];
  if (node.type === 'parallel') {
    // Each region is drawn as its own composite, separated by Mermaid's concurrency marker.
    children.forEach((region, i) => {
      if (i > 0) lines.push(`${indent}--`);
      emitNode(region, indent, lines, edges);
    });
  } else {
    const initial = node.type === 'compound' ? node.initial?.target?.[0] : undefined;
    if (initial) lines.push(`${indent}[*] --> ${nodeId(initial)}`);
    for (const child of children) emitNode(child, indent, lines, edges);
  }
  for (const edge of edges.get(node) ?? []) lines.push(`${indent}${edge}`);
}

function emitNode(node: AnyStateNode, indent: string, lines: string[], edges: Map<AnyStateNode, string[]>): void {
  const id = nodeId(node);
  if (id !== node.key) lines.push(`${indent}state "${node.key}" as ${id}`);
  if (node.type === 'compound' || node.type === 'parallel') {
    lines.push(`${indent}state ${id} {`);
    emitChildren(node, indent + '  ', lines, edges);
    lines.push(`${indent}}`);
  } else if (id === node.key) {
    lines.push(`${indent}${id}`);
  }
  if (node.type === 'final') lines.push(`${indent}${id} --> [*]`);
}

function* allNodes(node: AnyStateNode): Generator<AnyStateNode> {
  yield node;
  for (const child of Object.values(node.states) as AnyStateNode[]) yield* allNodes(child);
}

function edgesOf(node: AnyStateNode): Edge[] {
  const edges: Edge[] = [];
  const add = (eventLabel: string, transitions: readonly any[] | undefined) => {
    for (const t of transitions ?? []) {
      const label = transitionLabel(eventLabel, t);
      const targets: AnyStateNode[] = t.target?.length ? t.target : [node];
      for (const to of targets) edges.push({ from: node, to, label });
    }
  };
  // Invoked actors are named by their source (`done(load)`), not by their generated id.
  const sources = new Map<string, string>();
  for (const inv of node.invoke) sources.set(inv.id, typeof inv.src === 'string' ? inv.src : inv.id);
  for (const [eventType, transitions] of node.transitions) add(eventLabel(eventType, sources), transitions);
  add('always', node.always);
  return edges;
}

/** An event type as people read it: `done(source)` / `error(source)` for invoked actors. Shared with the viewer. */
export function eventLabel(eventType: string, sources: ReadonlyMap<string, string> = new Map()): string {
  const done = /^xstate\.done\.actor\.(.+)$/.exec(eventType);
  if (done) return `done(${sources.get(done[1]!) ?? shortActorId(done[1]!)})`;
  const error = /^xstate\.error\.actor\.(.+)$/.exec(eventType);
  if (error) return `error(${sources.get(error[1]!) ?? shortActorId(error[1]!)})`;
  if (eventType === '*') return 'any event';
  return eventType;
}

/** Invoked actors without an explicit id get `0.machine.state` ids; the last part reads better. */
function shortActorId(id: string): string {
  const parts = id.split('.');
  return /^\d+$/.test(parts[0] ?? '') ? parts[parts.length - 1]! : id;
}

/**
 * A transition as statecharts write it, `EVENT [guard] / action, action`: its guard and named
 * actions (an action written in place, such as an inline `assign(...)`, has no name to show).
 * Shared with the viewer.
 */
export function transitionLabel(
  eventLabel: string,
  transition: { guard?: unknown; actions?: readonly unknown[] },
): string {
  const guard = guardName(transition.guard);
  const actions = actionNames(transition.actions);
  return [eventLabel, guard ? `[${guard}]` : '', actions.length ? `/ ${actions.join(', ')}` : '']
    .filter(Boolean)
    .join(' ');
}

function actionNames(actions: readonly unknown[] | undefined): string[] {
  const names: string[] = [];
  for (const action of actions ?? []) {
    const name = typeof action === 'string' ? action : (action as { type?: unknown } | null)?.type;
    // xstate's own built-ins (xstate.assign, xstate.raise, …) written inline are not named by the user.
    if (typeof name === 'string' && !name.startsWith('xstate.')) names.push(name);
  }
  return names;
}

/** A guard in words: named guards by name, xstate's and/or/not/stateIn spelled out. Shared with the viewer. */
export function guardName(guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    const g = guard as { name: string; guards?: unknown[]; stateValue?: unknown };
    if (g.name === 'stateIn' && g.stateValue !== undefined) {
      // '#machine.a.b' → 'in a.b' ('#' would start an entity code in Mermaid).
      const target =
        typeof g.stateValue === 'string' ? g.stateValue.replace(/^#[^.]*\./, '') : JSON.stringify(g.stateValue);
      return `in ${target}`;
    }
    if ((g.name === 'and' || g.name === 'or') && Array.isArray(g.guards))
      return g.guards.map(guardName).join(` ${g.name} `);
    if (g.name === 'not' && Array.isArray(g.guards)) return `not ${guardName(g.guards[0])}`;
    return g.name && g.name !== 'guard' ? g.name : 'guard';
  }
  if (typeof guard === 'object' && 'type' in guard && typeof (guard as { type: unknown }).type === 'string') {
    return (guard as { type: string }).type;
  }
  return 'guard';
}

/** Mermaid ids must be unique and plain, so nested states are named by their whole path. */
function nodeId(node: AnyStateNode): string {
  return node.path.map((p: string) => p.replace(/[^A-Za-z0-9_]/g, '_')).join('__') || 'root';
}

function lowestCompoundAncestor(a: AnyStateNode, b: AnyStateNode, root: AnyStateNode): AnyStateNode {
  const ancestors = new Set<AnyStateNode>();
  for (let n: AnyStateNode | undefined = a.parent; n; n = n.parent) ancestors.add(n);
  for (let n: AnyStateNode | undefined = b.parent; n; n = n.parent) {
    // A transition into a parallel region belongs to the region's block, not between regions.
    if (ancestors.has(n) && n.type !== 'parallel') return n;
  }
  return root;
}

/**
 * Rewrites the generated diagrams of a Markdown page: every ```mermaid block right after a
 * `<!-- diagram: NAME -->` line gets `diagrams[NAME]` (indented like the marker, so blocks inside
 * list items work). Unknown names are an error, so a renamed machine cannot leave a stale picture.
 */
export function replaceDiagramBlocks(markdown: string, diagrams: { [name: string]: string }): string {
  return markdown.replace(
    /^( *)<!-- diagram: ([\w-]+) -->\n\1```mermaid\n(?:[\s\S]*?\n)??\1```/gm,
    (_block, indent: string, name: string) => {
      const diagram = diagrams[name];
      if (diagram === undefined)
        throw new RangeError(`no diagram named "${name}"; known: ${Object.keys(diagrams).join(', ')}`);
      const body = diagram
        .split('\n')
        .filter((line, i, all) => i < all.length - 1 || line !== '')
        .map((line) => indent + line)
        .join('\n');
      return `${indent}<!-- diagram: ${name} -->\n${indent}\`\`\`mermaid\n${body}\n${indent}\`\`\``;
    },
  );
}
