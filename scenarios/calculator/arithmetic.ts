/**
 * A safe arithmetic evaluator: a recursive-descent parser over + - * / ^, parentheses, unary minus
 * and decimal numbers. Model text is parsed, never evaluated as code.
 */
export class ArithmeticError extends Error {}

const MAX_LENGTH = 200;

export function evaluateArithmetic(source: string): number {
  if (source.length > MAX_LENGTH) throw new ArithmeticError(`expression longer than ${MAX_LENGTH} characters`);
  let at = 0;
  const peek = () => {
    while (source[at] === ' ') at++;
    return source[at];
  };
  const fail = (what: string): never => {
    throw new ArithmeticError(`${what} at position ${at + 1} of "${source}"`);
  };
  const number = (): number => {
    const match = /^\d+(\.\d+)?/.exec(source.slice(at));
    if (!match) return fail(peek() === undefined ? 'unexpected end of expression' : `unexpected "${peek()}"`);
    at += match[0].length;
    return Number(match[0]);
  };
  const atom = (): number => {
    const c = peek();
    if (c === '(') {
      at++;
      const v = sum();
      if (peek() !== ')') fail('missing ")"');
      at++;
      return v;
    }
    if (c === '-') {
      at++;
      return -atom();
    }
    return number();
  };
  const power = (): number => {
    const base = atom();
    if (peek() === '^') {
      at++;
      return base ** power();
    }
    return base;
  };
  const product = (): number => {
    let v = power();
    for (let c = peek(); c === '*' || c === '/'; c = peek()) {
      at++;
      const rhs = power();
      if (c === '/' && rhs === 0) fail('division by zero');
      v = c === '*' ? v * rhs : v / rhs;
    }
    return v;
  };
  const sum = (): number => {
    let v = product();
    for (let c = peek(); c === '+' || c === '-'; c = peek()) {
      at++;
      v = c === '+' ? v + product() : v - product();
    }
    return v;
  };
  const value = sum();
  if (peek() !== undefined) fail(`unexpected "${peek()}"`);
  if (!Number.isFinite(value)) throw new ArithmeticError('the result is not a finite number');
  return value;
}

/** A number as the tool prints it: integers plainly, others to at most 6 decimals. */
export function formatNumber(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Number(n.toFixed(6)));
}
