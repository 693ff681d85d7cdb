import type { Rng } from 'agent-r1-ts';

/**
 * A slippery gridworld: walls `#`, floor `.`, pits `O`, one key `K`, one locked door `D` in a wall
 * that splits the grid, and the goal `G`. x grows east, y grows south; `rows[y][x]` is a cell.
 */

export type Direction = 'north' | 'east' | 'south' | 'west';
export const DIRECTIONS: readonly Direction[] = ['north', 'east', 'south', 'west'];

export interface Point {
  x: number;
  y: number;
}

export interface Layout {
  width: number;
  height: number;
  /** The map without the agent; K and D are drawn where they start. */
  rows: string[];
  start: Point;
  key: Point;
  door: Point;
  goal: Point;
  /** Probability that a move slips to one of the two perpendicular directions (half each). */
  slip: number;
  /** Probability that turning the key opens the (stiff) lock. */
  unlock: number;
  /**
   * How far the agent sees (cells in each direction), in a dark dungeon: `look` shows that much
   * around it, and the map is not in the task. Absent: the whole map is known.
   */
  sight?: number;
}

export const STEP: Record<Direction, Point> = {
  north: { x: 0, y: -1 },
  east: { x: 1, y: 0 },
  south: { x: 0, y: 1 },
  west: { x: -1, y: 0 },
};

export function perpendicular(d: Direction): [Direction, Direction] {
  return d === 'north' || d === 'south' ? ['east', 'west'] : ['north', 'south'];
}

export function add(p: Point, d: Direction): Point {
  return { x: p.x + STEP[d].x, y: p.y + STEP[d].y };
}

export function cellAt(layout: Pick<Layout, 'rows'>, p: Point): string {
  return layout.rows[p.y]?.[p.x] ?? '#';
}

export const samePoint = (a: Point, b: Point) => a.x === b.x && a.y === b.y;

/** The direction from a to an adjacent b, if they are adjacent. */
export function directionTo(a: Point, b: Point): Direction | undefined {
  return DIRECTIONS.find((d) => samePoint(add(a, d), b));
}

const WIDTH = 9;
const HEIGHT = 7;

/** A random layout (not yet checked for solvability: see tasks.ts). */
export function randomLayout(rng: Rng): Layout {
  const grid: string[][] = [];
  for (let y = 0; y < HEIGHT; y++) {
    grid.push([]);
    for (let x = 0; x < WIDTH; x++)
      grid[y]!.push(x === 0 || y === 0 || x === WIDTH - 1 || y === HEIGHT - 1 ? '#' : '.');
  }
  const wallX = rng.int(4, 5);
  for (let y = 1; y < HEIGHT - 1; y++) grid[y]![wallX] = '#';
  const door = { x: wallX, y: rng.int(1, HEIGHT - 2) };
  grid[door.y]![door.x] = 'D';
  const left: Point[] = [];
  const right: Point[] = [];
  for (let y = 1; y < HEIGHT - 1; y++) {
    for (let x = 1; x < WIDTH - 1; x++) {
      if (x < wallX) left.push({ x, y });
      else if (x > wallX) right.push({ x, y });
    }
  }
  const reserved = [add(door, 'west'), add(door, 'east')];
  const free = (ps: Point[]) => rng.shuffle(ps.filter((p) => !reserved.some((r) => samePoint(r, p))));
  const l = free(left);
  const r = free(right);
  const start = l.pop()!;
  const key = l.pop()!;
  const goal = r.pop()!;
  grid[key.y]![key.x] = 'K';
  grid[goal.y]![goal.x] = 'G';
  // Obstacles: a few inner walls and pits on the remaining cells of both sides.
  for (const p of [...l, ...r]) {
    const u = rng.next();
    if (u < 0.1) grid[p.y]![p.x] = 'O';
    else if (u < 0.2) grid[p.y]![p.x] = '#';
  }
  return {
    width: WIDTH,
    height: HEIGHT,
    rows: grid.map((row) => row.join('')),
    start,
    key,
    door,
    goal,
    slip: Math.round(rng.int(10, 25)) / 100,
    unlock: 0.7,
  };
}

/**
 * A large dark dungeon (15 × 9, or 9 × 13 with the rooms stacked): two rooms split by a wall with
 * one locked door, the start at the far side of the first room, the exit at the far side of the
 * second, more pits (15%) and inner walls (10%) than the small one. Episodes run 20–40 turns.
 * `stacked` (the rooms one above the other) is the layout family the ood split holds out.
 */
export function randomLargeLayout(rng: Rng, stacked: boolean): Layout {
  // Drawn as side by side, then transposed when stacked: x ↔ y.
  const W = 15;
  const H = 9;
  const grid: string[][] = [];
  for (let y = 0; y < H; y++) {
    grid.push([]);
    for (let x = 0; x < W; x++) grid[y]!.push(x === 0 || y === 0 || x === W - 1 || y === H - 1 ? '#' : '.');
  }
  const wallX = rng.int(6, 8);
  for (let y = 1; y < H - 1; y++) grid[y]![wallX] = '#';
  const door = { x: wallX, y: rng.int(1, H - 2) };
  grid[door.y]![door.x] = 'D';
  const reserved = [add(door, 'west'), add(door, 'east')];
  const isFree = (p: Point) => !reserved.some((r) => samePoint(r, p));
  const start = { x: rng.int(1, 2), y: rng.int(1, H - 2) };
  const goal = { x: rng.int(W - 3, W - 2), y: rng.int(1, H - 2) };
  const left: Point[] = [];
  const right: Point[] = [];
  for (let y = 1; y < H - 1; y++) {
    for (let x = 1; x < W - 1; x++) {
      const p = { x, y };
      if (!isFree(p) || samePoint(p, start) || samePoint(p, goal)) continue;
      if (x < wallX) left.push(p);
      else if (x > wallX) right.push(p);
    }
  }
  // The key away from the start (at least 3 columns in), so fetching it is a trip of its own.
  const key = rng.pick(left.filter((p) => p.x >= 3));
  grid[key.y]![key.x] = 'K';
  grid[goal.y]![goal.x] = 'G';
  for (const p of [...left, ...right]) {
    if (samePoint(p, key)) continue;
    const u = rng.next();
    if (u < 0.15) grid[p.y]![p.x] = 'O';
    else if (u < 0.25) grid[p.y]![p.x] = '#';
  }
  const flip = (p: Point): Point => (stacked ? { x: p.y, y: p.x } : p);
  const rows = stacked
    ? Array.from({ length: W }, (_, x) => Array.from({ length: H }, (_, y) => grid[y]![x]).join(''))
    : grid.map((row) => row.join(''));
  return {
    width: stacked ? H : W,
    height: stacked ? W : H,
    rows,
    start: flip(start),
    key: flip(key),
    door: flip(door),
    goal: flip(goal),
    slip: Math.round(rng.int(5, 15)) / 100,
    unlock: 0.6,
    sight: 2,
  };
}

/** The cells within `radius` of `at` as the agent sees them (renderMap's symbols; beyond the edge: blank). */
export function renderView(layout: Layout, at: Point, hasKey: boolean, doorOpen: boolean, radius: number): string {
  const full = renderMap(layout, at, hasKey, doorOpen).split('\n');
  const lines: string[] = [];
  for (let y = at.y - radius; y <= at.y + radius; y++) {
    let line = '';
    for (let x = at.x - radius; x <= at.x + radius; x++) line += full[y]?.[x] ?? ' ';
    lines.push(line);
  }
  return lines.join('\n');
}

/** The map as the agent sees it: the agent `@`, the key gone once carried, the door open `/` once unlocked. */
export function renderMap(layout: Layout, at: Point, hasKey: boolean, doorOpen: boolean): string {
  return layout.rows
    .map((row, y) =>
      [...row]
        .map((c, x) => {
          if (x === at.x && y === at.y) return '@';
          if (c === 'K' && hasKey) return '.';
          if (c === 'D' && doorOpen) return '/';
          return c;
        })
        .join(''),
    )
    .join('\n');
}

const NEIGHBOUR: { [cell: string]: string } = { '#': 'wall', O: 'pit', G: 'exit', '.': 'floor' };

/** What lies next to `at` in each direction: "north floor, east pit, south wall, west key". */
export function surroundings(layout: Layout, at: Point, hasKey: boolean, doorOpen: boolean): string {
  return DIRECTIONS.map((d) => {
    const cell = cellAt(layout, add(at, d));
    const what =
      cell === 'D'
        ? doorOpen
          ? 'open door'
          : 'locked door'
        : cell === 'K'
          ? hasKey
            ? 'floor'
            : 'key'
          : NEIGHBOUR[cell];
    return `${d} ${what ?? 'floor'}`;
  }).join(', ');
}
