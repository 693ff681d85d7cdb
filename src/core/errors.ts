/** Base class: every error the library raises on purpose is one of these, with a message a user can act on. */
export class AgentR1Error extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A name (scenario, policy, tool, split, backend) that is not one of the valid choices. */
export class UnknownNameError extends AgentR1Error {
  constructor(
    readonly kind: string,
    readonly value: string,
    readonly choices: readonly string[],
  ) {
    super(`unknown ${kind} "${value}"; valid: ${choices.join(', ')}`);
  }
}

/** A record line that cannot be parsed, fails its schema, or fails its checksum. */
export class CorruptRecordError extends AgentR1Error {
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(line === undefined ? message : `line ${line}: ${message}`);
  }
}

/** A scenario that does not satisfy the scenario contract. */
export class ScenarioError extends AgentR1Error {}

/** Options that do not go together (e.g. a sampling temperature for a scripted policy). The CLI exits 2. */
export class UsageError extends AgentR1Error {}

/** Scenario options (from --data / --option) that the scenario rejects. A usage error. */
export class ScenarioOptionsError extends UsageError {}

// One copy of the library per thread: the TypeScript sources and the compiled package side by side
// (a script run through tsx without --conditions=source, whose scenarios import 'agent-r1-ts' from
// dist/) would make two of every class, and `instanceof` would fail between them.
const COPIES = Symbol.for('agent-r1-ts/copies');
const copies = ((globalThis as { [COPIES]?: Set<string> })[COPIES] ??= new Set<string>());
copies.add(new URL('../..', import.meta.url).href);
if (copies.size === 2) {
  const where = [...copies].join(' and ');
  process.emitWarning(
    `agent-r1-ts is loaded twice, from ${where}: run the TypeScript sources with --conditions=source`,
  );
}
