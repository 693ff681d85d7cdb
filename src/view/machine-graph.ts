import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { eventLabel, transitionLabel } from '../scenario/diagram.ts';

/** A state machine as a plain graph, read from the machine's own state nodes (never drawn by hand). */
export interface MachineGraph {
  id: string;
  initial: string | undefined;
  /** `region`: the top-level region a state belongs to, when the machine is parallel (drawn side by side). */
  nodes: { id: string; key: string; final: boolean; region?: string }[];
  /** One edge per (from, to) pair, its labels merged. */
  edges: { from: string; to: string; labels: string[] }[];
}

/**
 * Reads the drawable states (atomic and final ones; a compound state stands in for its initial
 * child) and the transitions between them: events, `done`/`error` of invoked actors, `always`
 * transitions, with their guards and named actions. Node ids are state paths joined with dots.
 */
export function machineGraph(machine: AnyStateMachine): MachineGraph {
  const root = machine.root as AnyStateNode;
  const nodes: MachineGraph['nodes'] = [];
  const edgeMap = new Map<string, { from: string; to: string; labels: string[] }>();
  const leafOf = (node: AnyStateNode): AnyStateNode => {
    let n = node;
    while (n.type === 'compound' && n.initial?.target?.[0]) n = n.initial.target[0] as AnyStateNode;
    if (n.type === 'parallel') {
      const first = Object.values(n.states)[0] as AnyStateNode | undefined;
      return first ? leafOf(first) : n;
    }
    return n;
  };
  const idOf = (node: AnyStateNode) => (node.path as string[]).join('.');
  const walk = (node: AnyStateNode) => {
    for (const child of Object.values(node.states) as AnyStateNode[]) {
      if (child.type === 'atomic' || child.type === 'final' || child.type === 'history') {
        if (child.type !== 'history') {
          const region = root.type === 'parallel' ? (child.path as string[])[0] : undefined;
          nodes.push({ id: idOf(child), key: child.key, final: child.type === 'final', ...(region ? { region } : {}) });
        }
      } else walk(child);
    }
  };
  walk(root);
  const drawable = new Set(nodes.map((n) => n.id));
  const addEdges = (node: AnyStateNode, label: string, transitions: readonly any[] | undefined) => {
    for (const t of transitions ?? []) {
      const text = transitionLabel(label, t);
      const targets: AnyStateNode[] = t.target?.length ? t.target : [node];
      // A transition defined on a compound state leaves from each of its drawn descendants.
      const sources = drawable.has(idOf(node))
        ? [idOf(node)]
        : nodes.filter((n) => n.id.startsWith(idOf(node) + '.')).map((n) => n.id);
      for (const target of targets) {
        const to = idOf(leafOf(target));
        for (const from of sources) {
          const key = `${from}\u0000${to}`;
          const edge = edgeMap.get(key) ?? { from, to, labels: [] };
          if (!edge.labels.includes(text)) edge.labels.push(text);
          edgeMap.set(key, edge);
        }
      }
    }
  };
  const visit = (node: AnyStateNode) => {
    for (const [eventType, transitions] of node.transitions as Map<string, readonly any[]>)
      addEdges(node, eventLabel(eventType), transitions);
    addEdges(node, 'always', node.always);
    for (const child of Object.values(node.states) as AnyStateNode[]) visit(child);
  };
  visit(root);
  const initialTarget = root.initial?.target?.[0] as AnyStateNode | undefined;
  return {
    id: machine.id,
    initial: initialTarget ? idOf(leafOf(initialTarget)) : nodes[0]?.id,
    nodes,
    edges: [...edgeMap.values()],
  };
}

/** Node id → layer (column) by longest path from the initial state, back edges (cycles) ignored. */
export function layerNodes(graph: MachineGraph): Map<string, number> {
  const out = new Map<string, string[]>();
  for (const n of graph.nodes) out.set(n.id, []);
  for (const e of graph.edges) if (e.from !== e.to) out.get(e.from)?.push(e.to);
  // Depth-first from the initial state marks back edges; what remains is acyclic.
  const back = new Set<string>();
  const color = new Map<string, 0 | 1 | 2>();
  const order: string[] = [];
  const dfs = (id: string) => {
    color.set(id, 1);
    for (const to of out.get(id) ?? []) {
      const c = color.get(to) ?? 0;
      if (c === 1) back.add(`${id}\u0000${to}`);
      else if (c === 0) dfs(to);
    }
    color.set(id, 2);
    order.push(id);
  };
  if (graph.initial) dfs(graph.initial);
  for (const n of graph.nodes) if (!color.get(n.id)) dfs(n.id);
  const layer = new Map<string, number>(graph.nodes.map((n) => [n.id, 0]));
  for (const id of order.reverse()) {
    for (const to of out.get(id) ?? []) {
      if (back.has(`${id}\u0000${to}`)) continue;
      layer.set(to, Math.max(layer.get(to)!, layer.get(id)! + 1));
    }
  }
  return layer;
}
