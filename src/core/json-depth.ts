/**
 * How deep a parsed JSON value nests, measured without recursion, so that a value nested deeper
 * than any stack (JSON.parse takes millions of levels) can be refused before code that recurses
 * over it (schema validation, canonical JSON, the checksum) overflows the stack.
 */

/** The deepest tool-call arguments an action may have (levels of objects and arrays). */
export const MAX_ARGUMENT_DEPTH = 64;

/** Whether `value` nests objects and arrays more than `max` levels deep. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}
