/**
 * Freezes an object and everything in it, and returns it. Values shared between episodes (a
 * scenario's pool tasks, cached tool results) are frozen so that no episode can change another's,
 * and so that canonicalJson may remember their JSON. An object already frozen is taken as frozen
 * through (canonicalJson checks each level itself).
 */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
