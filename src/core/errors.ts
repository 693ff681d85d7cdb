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

/** A record written in a schema version this build does not read (names both, so the fix is clear). */
export class RecordSchemaVersionError extends CorruptRecordError {
  constructor(
    readonly found: number,
    readonly supported: number,
    line?: number,
  ) {
    const newer = found > supported ? ' (written by a newer agent-r1: upgrade to read it)' : '';
    super(`record schema version ${found}; this agent-r1 reads version ${supported}${newer}`, line);
  }
}

/** A records file with nothing to work on: no valid record, or not the episode asked for. */
export class NoRecordsError extends AgentR1Error {
  constructor(
    readonly path: string,
    readonly episodeId?: string,
    readonly episodes = 0,
  ) {
    super(
      episodeId === undefined
        ? `${path} holds no episode records`
        : `no episode "${episodeId}" in ${path} (it holds ${episodes} other episode${episodes === 1 ? '' : 's'})`,
    );
  }
}

/**
 * An answer from outside the episode machine that breaks its contract: a policy output without a
 * string `text`, a ToolEnv step whose reward is not a number. The episode ends as an error record
 * with this message; `source` says whose answer it was.
 */
export class MalformedAnswerError extends AgentR1Error {
  constructor(
    readonly source: 'policy' | 'user policy' | 'ToolEnv step' | 'ToolEnv context' | 'ToolEnv outcome',
    readonly problem: string,
    readonly value: unknown,
  ) {
    super(`the ${source} returned ${problem} (got ${preview(value)})`);
  }
}

function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** A scenario that does not satisfy the scenario contract. */
export class ScenarioError extends AgentR1Error {}

/** A scenario's summarizer that threw on a record (in `digest` or `add`): the run's summary cannot be made. */
export class SummarizerError extends ScenarioError {
  constructor(
    readonly scenario: string,
    /** The episode whose record it threw on. */
    readonly index: number,
    readonly reason: string,
  ) {
    super(`scenario ${scenario}: its summarizer threw on episode ${index}: ${reason}`);
  }
}

/** A scenario whose tasks() gave a worker thread other tasks than the main thread for the same draw. */
export class TaskDrawMismatchError extends ScenarioError {
  constructor(
    readonly scenario: string,
    readonly draw: { split: string; seed: number; count: number },
    /** The episode whose task differed, and the task ids the main thread and the worker drew there. */
    readonly index: number,
    readonly expected: string,
    readonly got: string | null,
  ) {
    super(
      `scenario ${scenario}: tasks({ split: ${draw.split}, seed: ${draw.seed}, count: ${draw.count} }) drew ` +
        `${got === null ? 'no task' : `task ${got}`} for episode ${index} in a worker thread, and ${expected} in the ` +
        "main thread: a scenario's tasks must be a function of its query alone",
    );
  }
}

/** Options that do not go together (e.g. a sampling temperature for a scripted policy). The CLI exits 2. */
export class UsageError extends AgentR1Error {}

/** An output directory that already holds a run, which the command would overwrite (without --force). */
export class OutputExistsError extends UsageError {
  constructor(
    readonly path: string,
    readonly found: string,
  ) {
    super(`${path} already holds a run (${found}); choose another --out, or pass --force to overwrite it`);
  }
}

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
