import { UnknownNameError, UsageError } from '../core/errors.ts';

/** A scenario name that is neither built in nor a folder; the message says how to pass a folder. */
export class UnknownScenarioError extends UnknownNameError {
  constructor(value: string, choices: readonly string[]) {
    super('scenario', value, choices);
    this.message += '; or a scenario folder of your own: its path, e.g. ./my-scenario (a folder with an index.ts)';
  }
}

/** A record's scenario folder that is not where the record says (moved or deleted). A usage error. */
export class ScenarioFolderMissingError extends UsageError {
  constructor(
    readonly scenarioId: string,
    readonly source: string,
  ) {
    super(
      `scenario ${scenarioId} was loaded from ${source}, which is not a folder with an index.ts any more: ` +
        'pass --scenario DIR with the folder where it is now',
    );
  }
}

/**
 * A record (or a queue job) that names a scenario folder the user did not name. Its code is not
 * run: a record is data, and whoever wrote it does not decide what runs here. A usage error.
 */
export class UntrustedScenarioError extends UsageError {
  constructor(
    readonly scenarioId: string,
    readonly source: string,
    /** The scenarios the user did name, and what each is (`DIR is scenario X`). */
    readonly named: readonly string[] = [],
  ) {
    super(
      `scenario ${scenarioId} comes from the folder ${source}, which you have not named: a scenario ` +
        `folder's code runs only when you pass it (--scenario ${source}, after reading it)` +
        (named.length > 0 ? `; ${named.join(', ')}` : ''),
    );
  }
}
